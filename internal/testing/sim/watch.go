package sim

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/watch"
)

// watchBuffer is how many events a watch holds for its reader before the
// world keeps further ones queued.
const watchBuffer = 64

// simWatcher is one watch opened by an actor. Events wait in a queue until
// the world delivers them, which it does only once they are due by the
// actor's watch lag; so a lagging watch reports late and in order, like a
// slow connection, and a broken one is closed like a dropped connection.
type simWatcher struct {
	actor    *actorState
	resource string
	from     int64
	ch       chan watch.Event

	mu      sync.Mutex
	queue   []apiEvent
	closed  bool
	stopped chan struct{}
	onStop  func(*simWatcher)
}

var _ watch.Interface = (*simWatcher)(nil)

func newSimWatcher(actor *actorState, resource string, from int64) *simWatcher {
	return &simWatcher{
		actor: actor, resource: resource, from: from,
		ch: make(chan watch.Event, watchBuffer), stopped: make(chan struct{}),
	}
}

// offer queues ev if this watch reports it.
func (w *simWatcher) offer(ev apiEvent) {
	if ev.resource != w.resource || !(ev.rv > w.from || (ev.typ == watch.Deleted && ev.rv >= w.from)) {
		return
	}
	w.mu.Lock()
	if !w.closed {
		w.queue = append(w.queue, ev)
	}
	w.mu.Unlock()
}

// due is when the first queued event may be delivered.
func (w *simWatcher) due() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || len(w.queue) == 0 {
		return time.Time{}, false
	}
	return w.queue[0].at.Add(w.actor.watchLag()), true
}

// flushOne sends the first queued event if it is due by now and the
// buffer has room, and returns it and whether it sent one. The world sends one
// event at a time and settles in between, so that whether a reader sees an
// intermediate version or only the newest (client-go's informer and the
// lock's watch hand on only the latest) does not depend on the scheduler.
func (w *simWatcher) flushOne(now time.Time) (apiEvent, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || len(w.queue) == 0 || w.queue[0].at.Add(w.actor.watchLag()).After(now) {
		return apiEvent{}, false
	}
	w.dropSuperseded(now)
	ev := w.queue[0]
	select {
	case w.ch <- watch.Event{Type: ev.typ, Object: ev.obj.DeepCopyObject()}:
		w.queue = w.queue[1:]
		return ev, true
	default:
		return apiEvent{}, false
	}
}

// close ends the watch from the server side.
func (w *simWatcher) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		w.queue = nil
		close(w.ch)
	}
}

// Stop implements watch.Interface.
func (w *simWatcher) Stop() {
	w.close()
	w.mu.Lock()
	select {
	case <-w.stopped:
		w.mu.Unlock()
		return
	default:
		close(w.stopped)
	}
	onStop := w.onStop
	w.mu.Unlock()
	if onStop != nil {
		onStop(w)
	}
}

// ResultChan implements watch.Interface.
func (w *simWatcher) ResultChan() <-chan watch.Event { return w.ch }
