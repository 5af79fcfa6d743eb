package transport

import (
	"sync"
	"testing"
)

// Items from many goroutines all arrive, in batches, and none after Close.
func TestCoalescerDeliversEverythingOnce(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	batches := 0
	c := NewCoalescer(func(items []int) {
		mu.Lock()
		batches++
		for _, x := range items {
			seen[x]++
		}
		mu.Unlock()
	})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				if !c.Add(g*1000 + i) {
					t.Error("Add refused before Close")
				}
			}
		}(g)
	}
	wg.Wait()
	c.Close()
	if c.Add(-1) {
		t.Error("Add accepted after Close")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 8000 {
		t.Fatalf("%d distinct items delivered, want 8000", len(seen))
	}
	for x, n := range seen {
		if n != 1 {
			t.Fatalf("item %d delivered %d times", x, n)
		}
	}
	t.Logf("8000 items in %d batches", batches)
}

func TestBackoffGrowsToItsCap(t *testing.T) {
	b := Backoff{Min: 10, Max: 100, Factor: 2}
	want := []int{10, 20, 40, 80, 100, 100}
	for i, w := range want {
		if d := b.Delay(i, nil); int(d) != w {
			t.Errorf("attempt %d: %v, want %d", i, d, w)
		}
	}
	if err := (Backoff{Min: 10, Max: 5, Factor: 2}).Validate(); err == nil {
		t.Error("max below min accepted")
	}
}
