package shutdown

import (
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
)

// stages records the stages that ran, in order; graceful blocks until
// released, so that the test decides when the graceful stop ends.
type stages struct {
	mu      sync.Mutex
	ran     []string
	step    chan string // each stage's name as it runs
	release chan struct{}
}

func newStages() *stages {
	return &stages{step: make(chan string, 8), release: make(chan struct{})}
}

func (s *stages) stage(name string) func() {
	return func() {
		s.mu.Lock()
		s.ran = append(s.ran, name)
		s.mu.Unlock()
		s.step <- name
		if name == "graceful" {
			<-s.release
		}
	}
}

func (s *stages) hurry(n int) []func() {
	var hs []func()
	for i := range n {
		hs = append(hs, s.stage("hurry"+string(rune('1'+i))))
	}
	return hs
}

// wait runs Wait in a goroutine and returns a channel closed when it has
// returned.
func (s *stages) wait(sigs <-chan os.Signal, hurries int) <-chan struct{} {
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		Wait(sigs, s.stage("graceful"), s.hurry(hurries), s.stage("exit"))
	}()
	return returned
}

func (s *stages) expect(t *testing.T, name string) {
	t.Helper()
	if got := <-s.step; got != name {
		t.Fatalf("stage %q ran, want %q", got, name)
	}
}

// The first signal starts the graceful stop, the second cuts it short, the
// third exits; the graceful stop's end then returns.
func TestThreeSignals(t *testing.T) {
	s := newStages()
	sigs := make(chan os.Signal, 4)
	returned := s.wait(sigs, 1)
	sigs <- syscall.SIGTERM
	s.expect(t, "graceful")
	sigs <- os.Interrupt
	s.expect(t, "hurry1")
	sigs <- syscall.SIGTERM
	s.expect(t, "exit")
	close(s.release)
	<-returned
	if want := []string{"graceful", "hurry1", "exit"}; !slices.Equal(s.ran, want) {
		t.Errorf("stages %q, want %q", s.ran, want)
	}
}

// Each further signal runs the next hurry in turn, then exit; a signal past
// exit runs nothing more.
func TestEveryHurryInTurn(t *testing.T) {
	s := newStages()
	sigs := make(chan os.Signal, 8)
	returned := s.wait(sigs, 2)
	for _, want := range []string{"graceful", "hurry1", "hurry2", "exit"} {
		sigs <- os.Interrupt
		s.expect(t, want)
	}
	sigs <- os.Interrupt // a fifth
	close(s.release)
	<-returned
	if want := []string{"graceful", "hurry1", "hurry2", "exit"}; !slices.Equal(s.ran, want) {
		t.Errorf("stages %q, want %q", s.ran, want)
	}
}

// A graceful stop that ends before a second signal returns, and leaves
// later signals unread: nothing hurries a stop that is over.
func TestGracefulStopEndsTheEscalation(t *testing.T) {
	s := newStages()
	close(s.release) // graceful returns at once
	sigs := make(chan os.Signal, 4)
	sigs <- syscall.SIGTERM
	<-s.wait(sigs, 1)
	sigs <- syscall.SIGTERM
	sigs <- syscall.SIGTERM
	if len(sigs) != 2 {
		t.Errorf("%d of 2 later signals left on the channel", len(sigs))
	}
	if want := []string{"graceful"}; !slices.Equal(s.ran, want) {
		t.Errorf("stages %q, want %q", s.ran, want)
	}
}

// A closed channel starts the graceful stop and ends the escalation; nil
// stages do nothing.
func TestClosedChannel(t *testing.T) {
	s := newStages()
	close(s.release)
	sigs := make(chan os.Signal)
	close(sigs)
	Wait(sigs, s.stage("graceful"), []func(){nil, s.stage("hurry1")}, nil)
	if want := []string{"graceful"}; !slices.Equal(s.ran, want) {
		t.Errorf("stages %q, want %q", s.ran, want)
	}
	s2 := newStages()
	sigs2 := make(chan os.Signal, 4)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		Wait(sigs2, s2.stage("graceful"), []func(){nil}, s2.stage("exit"))
	}()
	sigs2 <- os.Interrupt
	s2.expect(t, "graceful")
	sigs2 <- os.Interrupt // the nil hurry
	sigs2 <- os.Interrupt
	s2.expect(t, "exit")
	close(s2.release)
	<-returned
}

// Notify delivers SIGTERM to the channel instead of ending the process.
func TestNotify(t *testing.T) {
	sigs, stop := Notify(1)
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := <-sigs; got != syscall.SIGTERM {
		t.Errorf("got %v", got)
	}
}
