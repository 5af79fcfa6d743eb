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

// Flush returns only once everything added before it was flushed, and
// Add still works after it.
func TestCoalescerFlushWaitsAndStaysOpen(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var got []int
	c := NewCoalescer(func(items []int) {
		<-release
		mu.Lock()
		got = append(got, items...)
		mu.Unlock()
	})
	c.Add(1) // its flush blocks on release
	c.Add(2)
	flushed := make(chan struct{})
	go func() {
		c.Flush()
		close(flushed)
	}()
	close(release)
	<-flushed
	mu.Lock()
	if len(got) != 2 {
		t.Errorf("Flush returned with %v flushed, want [1 2]", got)
	}
	mu.Unlock()
	if !c.Add(3) {
		t.Fatal("Add refused after Flush")
	}
	c.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got[2] != 3 {
		t.Errorf("after Close: %v, want [1 2 3]", got)
	}
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
