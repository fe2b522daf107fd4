// Package defaultwatch shares watches of the default revision among the
// elections of one election.Shared: every watcher of one SharedWatchers for
// the same client, webhook name and revision label reads one watch of the
// webhook, started with the first of them to run and stopped with the last.
package defaultwatch

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/election/revisionopts"
	"github.com/meshd-io/meshd/internal/refcount"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// SharedWatchers shares watches of the default revision among the
// watchers it builds: every watcher of one SharedWatchers for the same
// client, webhook name and revision label reads one watch of the webhook.
// Watchers of two SharedWatchers never share a watch, so a program (or a
// test building two independent worlds in one process) decides what is
// shared by which SharedWatchers it passes around; package election's Group
// keeps one for its elections.
//
// A SharedWatchers runs goroutines only while one of its watchers runs, so
// an unused one needs no stopping. It is safe for concurrent use. The zero
// value is not usable: call NewSharedWatchers.
type SharedWatchers struct {
	entries *refcount.Registry[sharedKey, *sharedEntry] // nil unless built by NewSharedWatchers
}

// NewSharedWatchers returns a SharedWatchers that runs no watch yet.
func NewSharedWatchers() *SharedWatchers {
	return &SharedWatchers{entries: new(refcount.Registry[sharedKey, *sharedEntry])}
}

// Watcher returns a revisions.DefaultWatcher that shares one watch of the webhook
// with every other watcher built by s for the same client, webhook name
// and revision label. The shared watch starts when the first of them runs
// and stops (its goroutines awaited) when the last one's Run returns; a
// later Run starts a fresh one. revisions.Options are validated as by
// revisions.NewDefaultWatcher; the logger of the first running watcher is the shared
// watch's.
//
// Each returned watcher keeps its own handlers, called only while its Run is
// running; GetDefault and HasSynced report the shared watch while Run is
// running, and "" and false otherwise. A client whose type cannot be a map
// key gets a watcher of its own.
func (s *SharedWatchers) Watcher(client kubernetes.Interface, opts revisions.Options) (revisions.DefaultWatcher, error) {
	if s == nil || s.entries == nil {
		return nil, errors.New("revisions: SharedWatchers not built with NewSharedWatchers")
	}
	if client == nil {
		return nil, errors.New("revisions: nil Kubernetes client")
	}
	opts = withDefaults(opts)
	if err := revisionopts.Validate(opts.MeshNamespace, opts.WebhookName, opts.RevisionLabel); err != nil {
		return nil, fmt.Errorf("revisions: %w", err)
	}
	if !reflect.TypeOf(client).Comparable() {
		return revisions.NewDefaultWatcher(client, opts)
	}
	key := sharedKey{client: client, webhook: opts.WebhookName, label: opts.RevisionLabel}
	return &sharedWatcher{registry: s, key: key, opts: opts}, nil
}

// withDefaults fills the empty fields of opts that name the watch, as
// revisions.NewDefaultWatcher does.
func withDefaults(opts revisions.Options) revisions.Options {
	if opts.MeshNamespace == "" {
		opts.MeshNamespace = revisions.DefaultMeshNamespace
	}
	if opts.WebhookName == "" {
		opts.WebhookName = revisions.DefaultWebhookName(opts.MeshNamespace)
	}
	if opts.RevisionLabel == "" {
		opts.RevisionLabel = revisions.DefaultRevisionLabel
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return opts
}

// Running is the number of shared watches s runs now.
func (s *SharedWatchers) Running() int {
	if s.entries == nil {
		return 0
	}
	return s.entries.Len()
}

type sharedKey struct {
	client         kubernetes.Interface
	webhook, label string
}

// join returns the running entry of key with w in it, starting one if there
// is none, and the function that takes w out of it again: that function
// stops the entry, and waits for its goroutine, when w was the last one in
// it.
func (r *SharedWatchers) join(key sharedKey, opts revisions.Options, w *sharedWatcher) (*sharedEntry, func(), error) {
	started := false
	e, release, err := r.entries.Acquire(key, func() (*sharedEntry, func(), error) {
		e, err := startSharedEntry(key, opts, w)
		if err != nil {
			return nil, nil, err
		}
		started = true
		return e, e.shutdown, nil
	})
	if err != nil {
		return nil, nil, err
	}
	if !started {
		// The entry's first watcher joined before its watch ran, to see
		// the initial value; the others join now.
		e.add(w)
	}
	return e, func() {
		e.remove(w)
		release()
	}, nil
}

// sharedEntry is one running watch and the watchers reading it.
type sharedEntry struct {
	inner revisions.DefaultWatcher
	stop  chan struct{}
	done  chan struct{}

	mu       sync.Mutex
	watchers []*sharedWatcher
}

// startSharedEntry starts the shared watch of key with first as its first
// watcher, joined before the watch runs so that it sees the initial value.
func startSharedEntry(key sharedKey, opts revisions.Options, first *sharedWatcher) (*sharedEntry, error) {
	inner, err := revisions.NewDefaultWatcher(key.client, opts)
	if err != nil {
		return nil, err
	}
	e := &sharedEntry{inner: inner, stop: make(chan struct{}), done: make(chan struct{}),
		watchers: []*sharedWatcher{first}}
	inner.AddHandler(e.changed)
	go func() {
		defer close(e.done)
		inner.Run(e.stop)
	}()
	return e, nil
}

// shutdown stops the shared watch and waits for its goroutine; the
// SharedWatchers calls it once, when the last watcher leaves.
func (e *sharedEntry) shutdown() {
	close(e.stop)
	<-e.done
}

func (e *sharedEntry) add(w *sharedWatcher) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.watchers = append(e.watchers, w)
}

func (e *sharedEntry) remove(w *sharedWatcher) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.watchers = slices.DeleteFunc(e.watchers, func(x *sharedWatcher) bool { return x == w })
}

// changed fans a change out to the handlers of every watcher in e. It runs
// on the inner watcher's delivery goroutine, one change at a time, holding
// e.mu so that a watcher leaving waits for a call in progress and is never
// called after its Run returned.
func (e *sharedEntry) changed(revision string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, w := range e.watchers {
		for _, h := range w.handlerList() {
			h(revision)
		}
	}
}

// sharedWatcher is one user's view of a shared watch.
type sharedWatcher struct {
	registry *SharedWatchers
	key      sharedKey
	opts     revisions.Options

	mu       sync.Mutex
	started  bool
	entry    *sharedEntry // set while Run runs
	handlers []func(revision string)
}

// Starter is implemented by a revisions.DefaultWatcher that can follow the default
// revision without a goroutine of the caller's: Start begins and returns at
// once; the returned function stops and returns once everything Start began
// has stopped. Start, like Run, is called once; a later call (or Run) does
// nothing but log.
type Starter interface {
	Start() (stop func())
}

var _ Starter = (*sharedWatcher)(nil)

// Run joins the shared watch until stop is closed. It returns after leaving
// it, and after the shared watch has stopped if this was its last user. A
// Run whose stop is already closed returns at once without joining.
func (w *sharedWatcher) Run(stop <-chan struct{}) {
	select {
	case <-stop:
		return
	default:
	}
	leave := w.Start()
	<-stop
	leave()
}

// Start joins the shared watch; the returned function leaves it, stopping
// the shared watch (and waiting for it) if this was its last user.
func (w *sharedWatcher) Start() (stop func()) {
	w.mu.Lock()
	started := w.started
	w.started = true
	w.mu.Unlock()
	if started {
		w.opts.Logger.Warn("default revision watcher already started; this start does nothing")
		return func() {}
	}
	e, leave, err := w.registry.join(w.key, w.opts, w)
	if err != nil {
		// revisions.Options were validated when w was built, so the watcher can be
		// built too; if not, a watcher that cannot watch knows no default.
		w.opts.Logger.Error("cannot watch the default revision", zap.Error(err))
		return func() {}
	}
	w.mu.Lock()
	w.entry = e
	w.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			w.entry = nil
			w.mu.Unlock()
			leave()
		})
	}
}

func (w *sharedWatcher) running() revisions.DefaultWatcher {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.entry == nil {
		return nil
	}
	return w.entry.inner
}

// HasSynced implements revisions.DefaultWatcher.
func (w *sharedWatcher) HasSynced() bool {
	inner := w.running()
	return inner != nil && inner.HasSynced()
}

// GetDefault implements revisions.DefaultWatcher.
func (w *sharedWatcher) GetDefault() string {
	if inner := w.running(); inner != nil {
		return inner.GetDefault()
	}
	return ""
}

// AddHandler implements revisions.DefaultWatcher.
func (w *sharedWatcher) AddHandler(h func(revision string)) {
	if h == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handlers = append(w.handlers, h)
}

func (w *sharedWatcher) handlerList() []func(revision string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.handlers)
}
