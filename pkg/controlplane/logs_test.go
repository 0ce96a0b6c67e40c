package controlplane

import (
	"testing"

	"go.uber.org/zap/zapcore"
)

// The etcd client logger the apiserver's storage uses is silent at
// verbosity 0 and back to the apiserver's own when logs are asked for.
func TestLogsSilenceTheEtcdClient(t *testing.T) {
	t.Cleanup(func() { Logs(0) })
	for _, tc := range []struct {
		v        int
		wantWarn bool
	}{{v: 0, wantWarn: false}, {v: 2, wantWarn: true}, {v: 0, wantWarn: false}} {
		Logs(tc.v)
		if got := etcdClientLogger.Core().Enabled(zapcore.WarnLevel); got != tc.wantWarn {
			t.Errorf("Logs(%d): etcd client warnings enabled = %v, want %v", tc.v, got, tc.wantWarn)
		}
	}
}
