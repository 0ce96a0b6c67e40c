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
		Settle:          time.Second,
		Timeout:         time.Minute,
		Speedup:         1,
	}, &out)
	if err != nil {
		t.Fatal(err)
	}
	report := out.String()
	t.Log("\n" + report)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^Muster sandbox: 3 nodes, 5 pods — 3 placed, 1 pending, 1 succeeded, 0 failed`),
		// The trainer tolerates the GPU taint and needs GPUs: only gpu-a fits.
		regexp.MustCompile(`(?m)^gpu-a\s+4/32\s+16Gi/128Gi\s+4/8\s+web/trainer$`),
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
