package batch

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestBinds: no more than n pods hold a slot; a pod holds at most one, and
// one held for its nomination is kept for its binding; a slot given back
// lets a waiting pod go; a pod that holds none gives back nothing; a wait
// ends with its context.
func TestBinds(t *testing.T) {
	ctx := context.Background()
	b := NewBinds(2)
	for _, uid := range []types.UID{"a", "b", "a"} {
		if err := b.Binding(ctx, uid); err != nil {
			t.Fatalf("Binding(%s): %v", uid, err)
		}
	}
	acquired := make(chan error)
	go func() { acquired <- b.Nominating(ctx, "c") }()
	select {
	case err := <-acquired:
		t.Fatalf("c acquired a third slot of two (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	b.Release("x") // holds none: frees nothing
	select {
	case err := <-acquired:
		t.Fatalf("c acquired after a pod with no slot released (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	b.Release("a")
	if err := <-acquired; err != nil {
		t.Fatalf("Nominating(c): %v", err)
	}
	if err := b.Binding(ctx, "c"); err != nil { // keeps its slot: no wait
		t.Fatalf("Binding(c): %v", err)
	}
	b.Release("a") // already given back
	cancelled, cancel := context.WithCancelCause(ctx)
	why := errors.New("preempted")
	cancel(why)
	if err := b.Binding(cancelled, "d"); !errors.Is(err, why) {
		t.Errorf("Binding with its context ended: %v, want %v", err, why)
	}
	b.Release("b")
	b.Release("c")
	if len(b.slots) != 0 || len(b.held) != 0 {
		t.Errorf("after every release: %d slots taken, %d pods held", len(b.slots), len(b.held))
	}
}

// TestNominationSeen: a slot held for a nomination is given back when the
// pod's NominatedNodeName is seen set or moved, or after nominationWait;
// not on other updates, and never while the pod binds.
func TestNominationSeen(t *testing.T) {
	pod := func(nominated string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "a"}, Status: v1.PodStatus{NominatedNodeName: nominated}}
	}
	tests := []struct {
		name     string
		binding  bool
		old, new *v1.Pod
		wait     time.Duration
		wantHeld bool
	}{
		{name: "nominated", old: pod(""), new: pod("n1")},
		{name: "nominated elsewhere", old: pod("n1"), new: pod("n2")},
		{name: "another update", old: pod("n1"), new: pod("n1"), wantHeld: true},
		{name: "nomination cleared", old: pod("n1"), new: pod(""), wantHeld: true},
		{name: "never seen, for a while", old: pod("n1"), new: pod("n1"), wait: nominationWait - time.Second, wantHeld: true},
		{name: "never seen", old: pod("n1"), new: pod("n1"), wait: nominationWait},
		{name: "binding when seen", binding: true, old: pod(""), new: pod("n1"), wantHeld: true},
		{name: "binding after the wait", binding: true, old: pod("n1"), new: pod("n1"), wait: nominationWait, wantHeld: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := NewBinds(1)
				if err := b.Nominating(context.Background(), "a"); err != nil {
					t.Fatal(err)
				}
				if tt.binding {
					if err := b.Binding(context.Background(), "a"); err != nil {
						t.Fatal(err)
					}
				}
				b.NominationSeen().OnUpdate(tt.old, tt.new)
				time.Sleep(tt.wait)
				synctest.Wait()
				b.mu.Lock()
				defer b.mu.Unlock()
				if _, held := b.held["a"]; held != tt.wantHeld || len(b.slots) != len(b.held) {
					t.Errorf("held %v (%d slots taken), want held %v", held, len(b.slots), tt.wantHeld)
				}
			})
		})
	}
}
