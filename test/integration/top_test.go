package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	queuecontroller "github.com/muster-sched/muster/pkg/controllers/queue"
	"github.com/muster-sched/muster/pkg/inspect"
	"github.com/muster-sched/muster/pkg/simulator"
)

// topOf runs `muster top` (-o wide when wide) on the case's queues, named
// top-*: other cases' queues may outlive them for a moment.
func (e *env) topOf(wide bool) (text, structured string) {
	e.t.Helper()
	rows, err := inspect.Top(e.ctx, inspectClients(e.t.(*testing.T)))
	if err != nil {
		e.t.Fatal(err)
	}
	var mine []inspect.TopQueue
	for _, r := range rows {
		if strings.HasPrefix(r.Name, "top-") {
			mine = append(mine, r)
		}
	}
	var out bytes.Buffer
	inspect.WriteTop(&out, mine, wide)
	data, err := json.MarshalIndent(mine, "", "  ")
	if err != nil {
		e.t.Fatal(err)
	}
	return out.String(), string(data) + "\n"
}

// settledFor is how long what the goldens show must stay the same: longer
// than two periods of the Queue status controller, whose figures they
// show, so that a status written just before the last change is not
// taken for the settled one.
const settledFor = 2*queuecontroller.Period + 500*time.Millisecond

// waitTopSettled waits until `muster top` has said the same for settledFor.
func (e *env) waitTopSettled(ok func(string) bool) {
	e.t.Helper()
	last, since := "", time.Now()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		now, _ := e.topOf(true)
		if now != last {
			last, since = now, time.Now()
		} else if ok(now) && time.Since(since) > settledFor {
			return
		}
	}
	e.t.Fatalf("muster top did not settle:\n%s", last)
}

func TestTop(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 4, simulator.NodeShape{CPU: "8", Memory: "32Gi", GPUs: 2})
	e.queue("top-org", v1alpha1.QueueSpec{Weight: 1})
	e.queue("top-a", v1alpha1.QueueSpec{Weight: 1, Parent: "top-org", Capability: res(string(simulator.GPUResource), "4")})
	e.queue("top-b", v1alpha1.QueueSpec{Weight: 3, Parent: "top-org"})
	e.queue("top-solo", v1alpha1.QueueSpec{Weight: 1, Guarantee: res("cpu", "2")})
	e.startScheduler(gangConfig(t))
	// top-a runs a gang of two 2-cpu 1-GPU members; top-b waits for a gang
	// no node fits; top-solo runs a pod of its own.
	for _, name := range names("train", 2) {
		p := e.pod(name, map[v1.ResourceName]string{v1.ResourceCPU: "2", simulator.GPUResource: "1"})
		p.Labels = musterLabels("train", 2)
		p.Labels[v1alpha1.LabelQueue] = "top-a"
		e.create(p)
	}
	wide := musterLabels("wide", 2)
	wide[v1alpha1.LabelQueue] = "top-b"
	e.members("wide", 2, "10", wide)
	e.create(e.member("solo", "1", map[string]string{v1alpha1.LabelQueue: "top-solo"}))
	e.waitBound("train-0", "train-1", "solo")
	e.waitTopSettled(func(s string) bool { return strings.Contains(s, "top-b") })

	text, structured := e.topOf(false)
	e.golden("top.txt", text)
	readmeShows(t, "testdata/top.txt")
	e.golden("top.json", structured)
	text, _ = e.topOf(true)
	e.golden("top-wide.txt", text)

	// kubectl get mq -o wide: the apiserver fills the GPU column from
	// its escaped JSONPath (.status.allocated.nvidia\.com/gpu).
	if got := queueColumns(t, "top-a"); got["GPU-Allocated"] != "2" || got["CPU-Allocated"] != "4" {
		t.Errorf("kubectl get mq top-a -o wide columns = %v, want GPU-Allocated 2, CPU-Allocated 4", got)
	}
}

// queueColumns reads the queue as kubectl get -o wide does: as a Table the
// apiserver prints from the CRD's printer columns.
func queueColumns(t *testing.T, name string) map[string]string {
	t.Helper()
	data, err := cluster.Muster.SchedulingV1alpha1().RESTClient().Get().Resource("queues").Name(name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(data, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("table of queue %s has %d rows", name, len(table.Rows))
	}
	out := map[string]string{}
	for i, c := range table.ColumnDefinitions {
		out[c.Name] = fmt.Sprint(table.Rows[0].Cells[i])
	}
	return out
}
