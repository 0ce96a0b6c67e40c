package gang

import (
	"fmt"
	"testing"
)

// BenchmarkPosition is what QueueSort reads of a pending member for a
// comparison, in gangs of 8 and 5,000 members with every other one
// reserved. kept: the ranks and creation time stay cached until the gang
// changes, as in production. afresh: both are computed again for every
// read, as they would be without the caches; the member's rank needs the
// gang's pending members sorted, so the difference grows with the gang.
func BenchmarkPosition(b *testing.B) {
	for _, size := range []int{8, 5000} {
		m, key, pods := benchGang(b, size)
		g := m.groups[key]
		for _, tc := range []struct {
			name   string
			afresh bool
		}{{"kept", false}, {"afresh", true}} {
			b.Run(fmt.Sprintf("members=%d/%s", size, tc.name), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if tc.afresh {
						g.ranks.Store(nil)
						g.createdAt.Store(nil)
					}
					uid := pods[2*(i%(size/2))].UID // a pending member
					i++
					if pos := m.Position(key, uid, true); !pos.Pending {
						b.Fatalf("member %s not pending: %+v", uid, pos)
					}
				}
			})
		}
	}
}
