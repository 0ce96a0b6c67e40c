package integration

import (
	"bytes"
	"io/fs"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/muster-sched/muster/config"
	"github.com/muster-sched/muster/pkg/sandbox"
)

// TestSandboxExamples runs what the README's first command runs: the
// sandbox on examples/, on a control plane of its own.
func TestSandboxExamples(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	schedConfig, err := fs.ReadFile(config.FS, "replace-default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = sandbox.Run(ctx, sandbox.Options{
		Paths:           []string{"../../examples"},
		SchedulerConfig: schedConfig,
		Settle:          2 * time.Second, // the command's default: longer than report-job's 1 s run
		Timeout:         time.Minute,
		Speedup:         1,
	}, &out)
	if err != nil {
		t.Fatal(err)
	}
	report := out.String()
	t.Log("\n" + report)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^Muster sandbox: 3 nodes, 12 pods — 6 placed, 5 pending, 1 succeeded, 0 failed`),
		// The gang resnet (3 × 2 GPUs) and the trainer (2 GPUs) fill gpu-a.
		regexp.MustCompile(`(?m)^gpu-a\s+16/32\s+64Gi/128Gi\s+8/8\s+ml/resnet-0 ml/resnet-1 ml/resnet-2 web/trainer$`),
		regexp.MustCompile(`(?m)^ml/resnet\s+-\s+Running\s+3\s+3\s+-$`),
		// The gang bert (4 × 3 GPUs) needs more than the default queue
		// deserves (8 GPUs less the trainer's 2, which no queue owns): it
		// is not admitted, and nothing binds.
		regexp.MustCompile(`(?m)^  ml/bert-3: 0/3 nodes are available: queue default: nvidia.com/gpu 6 allocated\+inqueue of 6 deserved, gang needs 12`),
		regexp.MustCompile(`(?m)^default\s+1\s+Open\s+cpu=12,memory=48Gi,nvidia.com/gpu=6\s`),
		regexp.MustCompile(`(?m)^  web/too-big: 0/3 nodes are available: 1 node\(s\) had untolerated taint\(s\), 2 Insufficient cpu`),
	} {
		if !want.MatchString(report) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The two frontends spread over the two cpu nodes, one each.
	if !strings.Contains(report, "web/frontend-0") || !strings.Contains(report, "web/frontend-1") ||
		regexp.MustCompile(`web/frontend-\d web/frontend-\d`).MatchString(report) {
		t.Errorf("want the frontends on two nodes:\n%s", report)
	}
}

func TestSandboxRefusesBadManifests(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	for _, tt := range []struct{ name, path, wantErr string }{
		{"missing file", "testdata/nope.yaml", "no such file"},
		{"node without capacity", "testdata/node-without-capacity.yaml", "testdata/node-without-capacity.yaml, document 1: node node-1 has no status.capacity"},
		{"no kind", "testdata/no-kind.yaml", "testdata/no-kind.yaml, document 2: apiVersion and kind are required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := sandbox.Run(ctx, sandbox.Options{Paths: []string{tt.path}, SchedulerConfig: []byte(stockConfig), Timeout: time.Second}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
