package defaultwatch

import (
	"slices"
	"sync"

	"github.com/meshd-io/meshd/pkg/revisions"
)

// Static is a revisions.DefaultWatcher whose default revision is set by
// the caller instead of read from the cluster, for tests, benchmarks and
// the simulation. It is always synced. The zero value is
// ready to use, with no default known ("").
type Static struct {
	// notify serialises SetDefault calls so that handlers see changes one at
	// a time and in the order they were made.
	notify sync.Mutex

	mu       sync.Mutex
	current  string
	handlers []func(revision string)
}

var _ revisions.DefaultWatcher = (*Static)(nil)

// NewStatic returns a watcher whose default revision is
// revision until changed with SetDefault. The dynamic type of the result is
// *Static.
func NewStatic(revision string) revisions.DefaultWatcher {
	return &Static{current: revision}
}

// Run blocks until stop is closed; there is nothing to watch.
func (s *Static) Run(stop <-chan struct{}) { <-stop }

// HasSynced is always true.
func (s *Static) HasSynced() bool { return true }

// GetDefault returns the current default revision.
func (s *Static) GetDefault() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

// AddHandler registers h, called by SetDefault on every change; see
// revisions.DefaultWatcher.AddHandler. It is not called for the initial value.
func (s *Static) AddHandler(h func(revision string)) {
	if h == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers = append(s.handlers, h)
}

// SetDefault changes the default revision and, if it differs from the
// current one, calls the handlers in registration order before returning.
// Concurrent calls are serialised; a handler must not call SetDefault (it
// would deadlock).
func (s *Static) SetDefault(revision string) {
	s.notify.Lock()
	defer s.notify.Unlock()

	s.mu.Lock()
	if revision == s.current {
		s.mu.Unlock()
		return
	}
	s.current = revision
	handlers := slices.Clone(s.handlers)
	s.mu.Unlock()

	for _, h := range handlers {
		h(revision)
	}
}
