package deploy

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

// TestAnonymousRequests runs the built scheduler as the chart deploys it and
// asks its secure port for each path with no credentials (as anyone on the
// pod network could) or with a token the apiserver does not know: only the
// health checks answer; metrics, profiles and configuration need a caller
// the apiserver authenticates and authorizes.
func TestAnonymousRequests(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	const ns = "muster-anonymous"
	r := installChart(t, ctx, "muster", ns)
	p := startReplica(t, ctx, r, "replica-0")
	if _, err := p.waitLog(ctx, leaseAcquired(ns+"/muster-scheduler"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.waitHTTP(ctx, "/readyz", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	refused := []int{http.StatusUnauthorized, http.StatusForbidden}
	tests := []struct {
		name, path, token string
		want              []int // any of these status codes
	}{
		{name: "healthz", path: "/healthz", want: []int{http.StatusOK}},
		{name: "livez", path: "/livez", want: []int{http.StatusOK}},
		{name: "readyz", path: "/readyz", want: []int{http.StatusOK}},
		{name: "metrics", path: "/metrics", want: refused},
		{name: "metrics with a token the apiserver does not know", path: "/metrics", token: "not-a-token", want: []int{http.StatusUnauthorized}},
		{name: "resource metrics", path: "/metrics/resources", want: refused},
		{name: "pprof index", path: "/debug/pprof/", want: refused},
		{name: "pprof heap", path: "/debug/pprof/heap", want: refused},
		{name: "pprof cpu profile", path: "/debug/pprof/profile?seconds=1", want: refused},
		{name: "log verbosity", path: "/debug/flags/v", want: refused},
		{name: "configz", path: "/configz", want: refused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, err := p.get(ctx, tt.path, tt.token)
			if err != nil {
				t.Fatalf("GET %s: %v", tt.path, err)
			}
			if !slices.Contains(tt.want, code) {
				t.Errorf("GET %s: %d %.200q; want one of %v", tt.path, code, body, tt.want)
			}
			t.Logf("GET %s: %d", tt.path, code)
		})
	}
	p.stop()
	if lines := p.forbidden(); len(lines) > 0 {
		t.Errorf("the chart's RBAC refused the scheduler:\n%s", strings.Join(lines, "\n"))
	}
}
