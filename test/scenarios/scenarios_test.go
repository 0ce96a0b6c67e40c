// Package scenarios runs the short subset of the standard scenario suite
// (the scenarios that finish in seconds) under every profile they name, on
// the in-process control plane, and fails on any bound a scenario states.
// `make bench` runs the whole suite with `muster bench test/scenarios`.
package scenarios

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/muster-sched/muster/pkg/controlplane"
	"github.com/muster-sched/muster/pkg/scenario"
)

// short is the subset run by `make test`: bounds that hold on any machine
// (no timing ratios), about a minute on two cores.
var short = []string{"demo.yaml", "packing.yaml", "reclaim.yaml", "topology-small.yaml"}

func TestShortSuite(t *testing.T) {
	if os.Getenv("MUSTER_TEST_LOGS") == "" {
		controlplane.QuietLogs()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var afterFirst int
	for i, file := range short {
		t.Run(strings.TrimSuffix(file, ".yaml"), func(t *testing.T) {
			s, err := scenario.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			results, err := scenario.Run(ctx, s, scenario.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(results) != len(s.Profiles) {
				t.Fatalf("got %d results, want one per profile (%d)", len(results), len(s.Profiles))
			}
			for _, r := range results {
				if r.Pods != s.PodCount() {
					t.Errorf("%s: observed %d pods, the scenario creates %d", r.Profile, r.Pods, s.PodCount())
				}
			}
			for _, f := range scenario.Check(s, results) {
				t.Error(f)
			}
			var table strings.Builder
			scenario.WriteTable(&table, scenario.NewReport(s, results))
			t.Log("\n" + table.String())
		})
		if i == 0 {
			afterFirst = settledGoroutines(0, 2*time.Second)
		}
	}
	// Every run stops what it started: later runs leave no more goroutines
	// behind than the first (whose process-wide singletons stay).
	if got := settledGoroutines(afterFirst, 20*time.Second); got > afterFirst+5 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after the runs, %d after the first: runs leak goroutines\n%s", got, afterFirst, buf[:runtime.Stack(buf, true)])
	}
}

// settledGoroutines returns the goroutine count once it is at most
// target+5, or when wait has passed. It collects garbage before each count:
// client-go's TLS transport cache stops a transport's certificate-reload
// goroutine only when the transport is collected, and each control plane's
// apiserver makes such transports for its own certificate files.
func settledGoroutines(target int, wait time.Duration) int {
	deadline := time.Now().Add(wait)
	for {
		runtime.GC()
		n := runtime.NumGoroutine()
		if n <= target+5 || !time.Now().Before(deadline) {
			return n
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestMalformedScenariosAreRefused(t *testing.T) {
	tests := []struct {
		name, file, want string
	}{
		{"unknown field", "testdata/unknown-field.yaml", "testdata/unknown-field.yaml: line 11: cluster.nodes[0].gpu: unknown field"},
		{"negative count", "testdata/negative-count.yaml", "testdata/negative-count.yaml: line 14: workloads[0].repeat: must not be negative (got -3)"},
		{"unknown resource", "testdata/unknown-resource.yaml", `testdata/unknown-resource.yaml: line 16: workloads[0].requests.nvidia.com/gpus: unknown resource "nvidia.com/gpus"`},
		{"partial rack", "testdata/partial-rack.yaml", "testdata/partial-rack.yaml: line 9: cluster.nodes[0].topology.nodesPerRack: must divide the group's count (6) into whole racks (got 4)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scenario.Load(tc.file)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load(%s) = %v, want an error containing %q", tc.file, err, tc.want)
			}
		})
	}
}
