package validation

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/muster-sched/muster/apis/config"
)

// TestValidateGangArgs: the Permit timeout and the plan step must each be
// positive, and each that is not is named; topology levels are label keys,
// each named once.
func TestValidateGangArgs(t *testing.T) {
	tests := []struct {
		name string
		args config.GangArgs
		want string
	}{
		{name: "defaults", args: config.GangArgs{DefaultScheduleTimeoutSeconds: 60, PlanStepMilliseconds: 100}},
		{name: "no timeout", args: config.GangArgs{PlanStepMilliseconds: 100},
			want: "gangArgs.defaultScheduleTimeoutSeconds: Invalid value: 0: must be at least 1"},
		{name: "negative plan step", args: config.GangArgs{DefaultScheduleTimeoutSeconds: 60, PlanStepMilliseconds: -1},
			want: "gangArgs.planStepMilliseconds: Invalid value: -1: must be at least 1"},
		{name: "topology levels", args: config.GangArgs{DefaultScheduleTimeoutSeconds: 60, PlanStepMilliseconds: 100,
			TopologyLevels: []string{"kubernetes.io/hostname", "topology.muster.dev/rack"}}},
		{name: "bad topology level", args: config.GangArgs{DefaultScheduleTimeoutSeconds: 60, PlanStepMilliseconds: 100,
			TopologyLevels: []string{"rack key"}},
			want: `gangArgs.topologyLevels[0]: Invalid value: "rack key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`},
		{name: "topology level twice", args: config.GangArgs{DefaultScheduleTimeoutSeconds: 60, PlanStepMilliseconds: 100,
			TopologyLevels: []string{"topology.muster.dev/rack", "topology.muster.dev/rack"}},
			want: `gangArgs.topologyLevels[1]: Duplicate value: "topology.muster.dev/rack"`},
		{name: "both", args: config.GangArgs{},
			want: "[gangArgs.defaultScheduleTimeoutSeconds: Invalid value: 0: must be at least 1, gangArgs.planStepMilliseconds: Invalid value: 0: must be at least 1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if err := ValidateGangArgs(field.NewPath("gangArgs"), &tt.args); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ValidateGangArgs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestValidateOvercommitFactor: the factor lies in [1, 100]; NaN and
// infinities are refused.
func TestValidateOvercommitFactor(t *testing.T) {
	tests := []struct {
		factor float64
		want   string
	}{
		{factor: 1},
		{factor: 1.2},
		{factor: 100},
		{factor: 0.5, want: "args.overcommitFactor: Invalid value: 0.5: must be between 1 and 100"},
		{factor: 101, want: "args.overcommitFactor: Invalid value: 101: must be between 1 and 100"},
		{factor: math.Inf(1), want: "args.overcommitFactor: Invalid value: +Inf: must be between 1 and 100"},
		{factor: math.NaN(), want: "args.overcommitFactor: Invalid value: NaN: must be between 1 and 100"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.factor), func(t *testing.T) {
			got := ""
			if err := ValidateOvercommitFactor(field.NewPath("args"), tt.factor); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ValidateOvercommitFactor (-want +got):\n%s", diff)
			}
		})
	}
}
