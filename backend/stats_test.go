package backend

import (
	"testing"
	"time"
)

// Models copies the per-model counts, sorted by name, and a later update
// does not change a copy taken before it.
func TestModelCounts(t *testing.T) {
	var s Stats
	if len(s.Models()) != 0 {
		t.Fatal("counts before any plan")
	}
	s.model("resnet", func(m *ModelCounts) { m.Plans++; m.Requests += 4 })
	s.model("cnn", func(m *ModelCounts) { m.Plans++; m.Requests++ })
	s.model("resnet", func(m *ModelCounts) { m.Failed, m.Dropped, m.Busy = 1, 2, 3*time.Millisecond })
	got := s.Models()
	want := []ModelCounts{{Model: "cnn", Plans: 1, Requests: 1}, {Model: "resnet", Plans: 1, Requests: 4, Failed: 1, Dropped: 2, Busy: 3 * time.Millisecond}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("%+v, want %+v", got, want)
	}
	s.model("cnn", func(m *ModelCounts) { m.Plans++ })
	if got[0].Plans != 1 {
		t.Error("a copy changed with a later update")
	}
}
