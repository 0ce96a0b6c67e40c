package podgroup

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestWritten(t *testing.T) {
	podgroups := schema.GroupResource{Group: "scheduling.volcano.sh", Resource: "podgroups"}
	failed := errors.New("connection refused")
	tests := []struct {
		name        string
		err         error
		wantRequeue bool
		wantErr     error
	}{
		{name: "written"},
		{name: "deleted meanwhile: nothing to write", err: apierrors.NewNotFound(podgroups, "g")},
		{name: "conflict: again once the informer caught up", err: apierrors.NewConflict(podgroups, "g", failed), wantRequeue: true},
		{name: "other errors are reported", err: failed, wantErr: failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requeue, err := written(tt.err)
			if requeue != tt.wantRequeue || !errors.Is(err, tt.wantErr) {
				t.Errorf("written(%v) = %t, %v; want %t, %v", tt.err, requeue, err, tt.wantRequeue, tt.wantErr)
			}
		})
	}
}
