package refcount

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// worker is a shared value that runs a goroutine from its creation until
// it is stopped, so that goleak sees a value that was never stopped.
type worker struct {
	id      int
	quit    chan struct{}
	done    chan struct{}
	stops   atomic.Int32
	stopped atomic.Bool // set as stop begins
}

func (w *worker) stop() {
	w.stopped.Store(true)
	w.stops.Add(1)
	close(w.quit)
	<-w.done
}

// world counts what a registry asked of its values' creator.
type world struct {
	reg     Registry[string, *worker]
	mu      sync.Mutex
	made    []*worker
	failing bool
}

var errCreate = errors.New("cannot create")

// create returns the creator of one acquisition: a new running worker, or
// errCreate while w is failing.
func (w *world) create() (*worker, func(), error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failing {
		return nil, nil, errCreate
	}
	v := &worker{id: len(w.made), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(v.done)
		<-v.quit
	}()
	w.made = append(w.made, v)
	return v, v.stop, nil
}

func (w *world) creates() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.made)
}

func (w *world) acquire(t *testing.T, key string) (*worker, func()) {
	t.Helper()
	v, release, err := w.reg.Acquire(key, w.create)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	if v == nil || release == nil {
		t.Fatalf("Acquire(%q) returned value %v and a release? %t", key, v, release != nil)
	}
	return v, release
}

func (w *world) expect(t *testing.T, entries, users, creates int) {
	t.Helper()
	if got := w.reg.Len(); got != entries {
		t.Errorf("Len() = %d, want %d", got, entries)
	}
	if got := w.reg.Users(); got != users {
		t.Errorf("Users() = %d, want %d", got, users)
	}
	if got := w.creates(); got != creates {
		t.Errorf("create called %d times, want %d", got, creates)
	}
}

// expectStops fails t unless v has been stopped want times.
func expectStops(t *testing.T, v *worker, want int32) {
	t.Helper()
	if got := v.stops.Load(); got != want {
		t.Fatalf("value %d stopped %d times, want %d", v.id, got, want)
	}
}

func TestRegistry(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, w *world)
	}{{
		name: "first acquire creates",
		run: func(t *testing.T, w *world) {
			w.expect(t, 0, 0, 0)
			v, release := w.acquire(t, "a")
			w.expect(t, 1, 1, 1)
			if v.stopped.Load() {
				t.Fatal("a fresh value is stopped")
			}
			release()
		},
	}, {
		name: "second acquire shares",
		run: func(t *testing.T, w *world) {
			a, releaseA := w.acquire(t, "a")
			b, releaseB := w.acquire(t, "a")
			if a != b {
				t.Fatal("two users of one key got two values")
			}
			w.expect(t, 1, 2, 1)
			releaseA()
			releaseB()
		},
	}, {
		name: "other keys get their own values",
		run: func(t *testing.T, w *world) {
			a, releaseA := w.acquire(t, "a")
			b, releaseB := w.acquire(t, "b")
			if a == b {
				t.Fatal("two keys share a value")
			}
			w.expect(t, 2, 2, 2)
			releaseA()
			expectStops(t, a, 1)
			expectStops(t, b, 0)
			w.expect(t, 1, 1, 2)
			releaseB()
		},
	}, {
		name: "the last release stops exactly once",
		run: func(t *testing.T, w *world) {
			v, releaseA := w.acquire(t, "a")
			_, releaseB := w.acquire(t, "a")
			releaseA()
			expectStops(t, v, 0) // a user remains
			releaseB()
			expectStops(t, v, 1)
			w.expect(t, 0, 0, 1)
		},
	}, {
		name: "a double release is harmless",
		run: func(t *testing.T, w *world) {
			v, releaseA := w.acquire(t, "a")
			_, releaseB := w.acquire(t, "a")
			releaseA()
			releaseA()
			expectStops(t, v, 0) // B still holds it
			w.expect(t, 1, 1, 1)
			releaseB()
			// Late calls of the old releases do not touch the key's
			// next value.
			fresh, releaseC := w.acquire(t, "a")
			releaseA()
			releaseB()
			expectStops(t, v, 1)
			expectStops(t, fresh, 0)
			w.expect(t, 1, 1, 2)
			releaseC()
		},
	}, {
		name: "an acquire after teardown creates anew",
		run: func(t *testing.T, w *world) {
			old, release := w.acquire(t, "a")
			release()
			v, release := w.acquire(t, "a")
			defer release()
			if v == old || v.stopped.Load() {
				t.Fatal("a stopped value was handed out again")
			}
			w.expect(t, 1, 1, 2)
		},
	}, {
		name: "a create error leaves nothing behind",
		run: func(t *testing.T, w *world) {
			w.failing = true
			v, release, err := w.reg.Acquire("a", w.create)
			if !errors.Is(err, errCreate) || v != nil || release != nil {
				t.Fatalf("Acquire = %v, release? %t, %v; want nil, no release, %v", v, release != nil, err, errCreate)
			}
			w.expect(t, 0, 0, 0)
			w.failing = false
			_, release = w.acquire(t, "a")
			w.expect(t, 1, 1, 1)
			release()
		},
	}, {
		name: "a create error does not disturb a running entry of another key",
		run: func(t *testing.T, w *world) {
			v, release := w.acquire(t, "a")
			defer release()
			w.failing = true
			if _, _, err := w.reg.Acquire("b", w.create); err == nil {
				t.Fatal("no error")
			}
			if got, releaseAgain := w.acquire(t, "a"); got != v {
				t.Fatal("a failed create replaced a running value")
			} else {
				releaseAgain()
			}
			w.expect(t, 1, 1, 1)
		},
	}, {
		name: "a nil stop is allowed",
		run: func(t *testing.T, w *world) {
			var r Registry[int, string]
			v, release, err := r.Acquire(1, func() (string, func(), error) { return "one", nil, nil })
			if err != nil || v != "one" {
				t.Fatalf("Acquire = %q, %v", v, err)
			}
			release()
			if r.Len() != 0 {
				t.Fatal("entry left after its release")
			}
		},
	}, {
		name: "stop runs outside the lock",
		run: func(t *testing.T, w *world) {
			var r Registry[string, int]
			entered, proceed := make(chan struct{}), make(chan struct{})
			_, release, _ := r.Acquire("slow", func() (int, func(), error) {
				return 1, func() {
					close(entered)
					<-proceed
				}, nil
			})
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				release()
			}()
			<-entered
			// While "slow" is stopping, the registry answers, has
			// forgotten it and creates it afresh.
			if got := r.Len(); got != 0 {
				t.Errorf("Len() = %d while the last entry stops, want 0", got)
			}
			v, releaseNew, err := r.Acquire("slow", func() (int, func(), error) { return 2, nil, nil })
			if err != nil || v != 2 {
				t.Errorf("Acquire during teardown = %d, %v; want a fresh value 2", v, err)
			}
			select {
			case <-stopped:
				t.Error("the last release returned before its stop did")
			default:
			}
			close(proceed)
			<-stopped
			if releaseNew != nil {
				releaseNew()
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			w := &world{}
			tc.run(t, w)
			if got := w.reg.Len(); got != 0 {
				t.Fatalf("%d entries left at the end", got)
			}
			for _, v := range w.made {
				expectStops(t, v, 1)
			}
		})
	}
}

// TestRegistryConcurrent acquires and releases a few keys from many
// goroutines (run it with -race): no user ever holds a value whose stop has
// begun, every value is stopped exactly once, and nothing is left.
func TestRegistryConcurrent(t *testing.T) {
	defer goleak.VerifyNone(t)
	const goroutines, rounds, keys = 32, 200, 4
	w := &world{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range rounds {
				key := fmt.Sprint((g + i) % keys)
				v, release, err := w.reg.Acquire(key, w.create)
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				if v.stopped.Load() {
					t.Errorf("key %s: handed out a value being stopped", key)
				}
				if i%3 == 0 {
					// Share it with a second acquisition of this goroutine.
					again, releaseAgain, _ := w.reg.Acquire(key, w.create)
					if again != v {
						t.Errorf("key %s: two values live at once", key)
					}
					releaseAgain()
				}
				if v.stopped.Load() {
					t.Errorf("key %s: stopped while held", key)
				}
				release()
				release()
			}
		})
	}
	wg.Wait()
	w.expect(t, 0, 0, w.creates())
	for _, v := range w.made {
		expectStops(t, v, 1)
	}
	t.Logf("%d values created for %d acquisitions", w.creates(), goroutines*rounds)
}
