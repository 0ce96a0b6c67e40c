package deploy

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

// TestAnonymousRequests runs the built scheduler as the chart deploys it and
// sends its secure port each request with no credentials (as anyone on the
// pod network could) or with a token the apiserver does not know: only the
// health checks answer; metrics, profiles, configuration and the log level
// need a caller the apiserver authenticates and authorizes.
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
		name, method, path, token string
		want                      []int // any of these status codes
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
		{name: "log verbosity set", method: http.MethodPut, path: "/debug/flags/v", want: refused},
		{name: "configz", path: "/configz", want: refused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := cmp.Or(tt.method, http.MethodGet)
			code, body, err := anonymousRequest(ctx, p, method, tt.path, tt.token)
			if err != nil {
				t.Fatalf("%s %s: %v", method, tt.path, err)
			}
			if !slices.Contains(tt.want, code) {
				t.Errorf("%s %s: %d %.200q; want one of %v", method, tt.path, code, body, tt.want)
			}
		})
	}
	p.stop()
	if lines := p.forbidden(); len(lines) > 0 {
		t.Errorf("the chart's RBAC refused the scheduler:\n%s", strings.Join(lines, "\n"))
	}
}

// anonymousRequest sends method path to the process's secure port, with a
// bearer token unless empty (a PUT with the body "5"), and returns the
// status code and body.
func anonymousRequest(ctx context.Context, p *schedulerProcess, method, path, token string) (int, string, error) {
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
	var body io.Reader
	if method == http.MethodPut {
		body = strings.NewReader("5")
	}
	req, err := http.NewRequestWithContext(ctx, method, fmt.Sprintf("https://127.0.0.1:%d%s", p.port, path), body)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out), err
}
