package defaultwatch

import (
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestStaticDefaultWatcher(t *testing.T) {
	defer goleak.VerifyNone(t)
	w := NewStatic("stable")
	if !w.HasSynced() || w.GetDefault() != "stable" {
		t.Fatalf("HasSynced=%v GetDefault=%q", w.HasSynced(), w.GetDefault())
	}
	var rec recorder
	w.AddHandler(rec.handler("a:"))
	w.AddHandler(nil) // ignored
	w.AddHandler(rec.handler("b:"))
	if len(rec.get()) != 0 {
		t.Fatal("handlers called for the initial value")
	}

	s := w.(*Static)
	s.SetDefault("canary")
	s.SetDefault("canary") // no change, no call
	s.SetDefault("")
	want := []string{"a:canary", "b:canary", "a:", "b:"}
	if got := rec.get(); !slices.Equal(got, want) {
		t.Fatalf("calls %q, want %q", got, want)
	}

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { w.Run(stop); close(done) }()
	select {
	case <-done:
		t.Fatal("Run returned before stop")
	case <-time.After(20 * time.Millisecond):
	}
	close(stop)
	<-done
}

func TestStaticDefaultWatcherZeroValueAndConcurrency(t *testing.T) {
	var w Static
	if w.GetDefault() != "" || !w.HasSynced() {
		t.Fatal("zero value is not an empty, synced watcher")
	}
	// Handlers see each change exactly once and never concurrently, and the
	// last value they see is the final default.
	var (
		mu      sync.Mutex
		running bool
		last    string
	)
	w.AddHandler(func(rev string) {
		mu.Lock()
		if running {
			t.Error("handler called concurrently")
		}
		running = true
		mu.Unlock()
		time.Sleep(time.Microsecond)
		mu.Lock()
		running = false
		last = rev
		mu.Unlock()
		_ = w.GetDefault() // handlers may read the watcher
	})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { w.SetDefault([]string{"a", "b", "c"}[i%3]) })
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if last != w.GetDefault() {
		t.Fatalf("last handler value %q, GetDefault %q", last, w.GetDefault())
	}
}
