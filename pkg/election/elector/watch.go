package elector

import (
	"errors"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockwatch"
)

// lockWatch follows the lock object through its hub's shared watch of
// its kind and namespace (Config.Hub). The hub only hands over the
// newest object; the election loop takes it (ingest) when it is ready, so the
// lock is only ever touched by the loop.
type lockWatch struct {
	le   *LeaderElector
	lock lockcap.Watchable

	// events has room for one wake-up; what the watch delivered meanwhile
	// waits in pending, in order.
	events chan struct{}

	mu      sync.Mutex
	pending []delivered
	// dropped is set when pending overflowed and its oldest entries were
	// dropped unseen.
	dropped bool

	// ok is true from the first successful list or event until the watch
	// reports an error, and again from the next event.
	ok atomic.Bool
	// joining is set while the hub subscribes this watch: what it delivers
	// meanwhile is its cache replayed, which it hands over even while the
	// shared watch is broken, so it says nothing of the watch's health.
	joining atomic.Bool
	// up is closed when the watch becomes healthy after start (under mu);
	// start opens a new one when the watch is not healthy then.
	up       chan struct{}
	upClosed bool

	// recordGone is set by ingest when the lock object was deleted or
	// replaced by one without a record while this candidate holds it; the
	// leader then writes its record again at once (used by the loop only).
	recordGone bool
}

// delivered is one object (or deletion) the watch handed over.
type delivered struct {
	obj     any
	deleted bool
}

// maxPending bounds the deliveries waiting for the loop. The loop takes
// them in order, so that a renewal followed by a deletion or a re-creation
// of the lock object is seen as what it is: the holder was alive just
// before. Past the bound the oldest are dropped and the holder's lease is
// taken as renewed when the rest is ingested (a later takeover, never an
// earlier one).
const maxPending = 64

// takeRecordGone reports and clears recordGone.
func (w *lockWatch) takeRecordGone() bool {
	gone := w.recordGone
	w.recordGone = false
	return gone
}

func newLockWatch(le *LeaderElector, lock lockcap.Watchable) *lockWatch {
	return &lockWatch{le: le, lock: lock, events: make(chan struct{}, 1), up: make(chan struct{})}
}

// watchEvents is the channel the election loop selects on; nil (never ready)
// without a watch.
func (le *LeaderElector) watchEvents() <-chan struct{} {
	if le.watch == nil {
		return nil
	}
	return le.watch.events
}

// healthy reports whether the watch can be trusted to report every change.
func (w *lockWatch) healthy() bool { return w.ok.Load() }

// healthyNow is closed once the watch is healthy after its last start.
func (w *lockWatch) healthyNow() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.up
}

// start follows the lock through the elector's watch hub until the
// returned function is called; that function returns once the hub will not
// call this watch again (and, if this was the last elector on that watch,
// once the watch has stopped).
func (w *lockWatch) start() (stop func()) {
	w.mu.Lock()
	if w.upClosed && !w.ok.Load() {
		w.up, w.upClosed = make(chan struct{}), false
	}
	w.mu.Unlock()
	w.joining.Store(true)
	unsubscribe := w.le.cfg.Hub.Subscribe(w.lock, lockwatch.Subscriber{
		OnObject: w.deliver,
		OnHealth: w.setHealth,
	})
	w.joining.Store(false)
	return func() {
		unsubscribe()
		w.ok.Store(false)
	}
}

// setHealth is called by the hub when the shared watch lists or breaks.
func (w *lockWatch) setHealth(ok bool) {
	if ok {
		w.ok.Store(true)
		w.mu.Lock()
		if !w.upClosed {
			close(w.up)
			w.upClosed = true
		}
		w.mu.Unlock()
		return
	}
	if w.ok.Swap(false) {
		w.le.log.Info("watch of the lock broke; polling until it is back")
		// Wake the loop: a follower asleep until the lease end it computed
		// must poll now, since renewals no longer reach it.
		w.wake()
	}
}

func (w *lockWatch) wake() {
	select {
	case w.events <- struct{}{}:
	default:
	}
}

// deliver is called by the hub with the newest object (or a deletion). A
// live delivery means the watch works; the cached object the hub hands a
// subscriber that joins does not (the hub hands it over even while the
// shared watch is broken and no watch is open), so a delivery while
// joining leaves the health to the hub's own report.
func (w *lockWatch) deliver(obj any, deleted bool) {
	w.mu.Lock()
	if len(w.pending) == maxPending {
		w.pending = append(w.pending[:0], w.pending[1:]...)
		w.dropped = true
	}
	w.pending = append(w.pending, delivered{obj: obj, deleted: deleted})
	w.mu.Unlock()
	if !w.joining.Load() {
		w.setHealth(true)
	}
	w.wake()
}

// ingest takes what the watch delivered into the lock and the elector's
// observation, in the order delivered. It returns false when there was
// nothing new.
func (w *lockWatch) ingest() bool {
	w.mu.Lock()
	batch, dropped := w.pending, w.dropped
	w.pending, w.dropped = nil, false
	w.mu.Unlock()
	if dropped {
		w.le.refreshObservedLease(w.le.clock.Now())
	}
	changed := false
	for _, d := range batch {
		if w.ingestOne(d.obj, d.deleted) {
			changed = true
		}
	}
	return changed
}

// ingestOne takes one delivery; false when it changed nothing.
func (w *lockWatch) ingestOne(obj any, deleted bool) bool {
	le := w.le
	now := le.clock.Now()
	rec, raw, err := w.lock.Observe(obj, deleted)
	if err == nil {
		le.noteEmpty(deleted || noRecord(rec), now)
	}
	mine := le.GetLeader() == le.cfg.Lock.Identity()
	switch {
	case errors.Is(err, lockwatch.ErrForeignObject):
		return false
	case err == nil && deleted && (le.holderMayBeWorking(now) || mine):
		// A deletion is not a release. Followers keep the holder's lease as
		// they saw it; the holder keeps leading and recreates the lock at
		// once, before a candidate that never saw its record takes it.
		le.log.Info("the lock object was deleted while held; keeping the holder's lease",
			zap.String("holder", le.GetLeader()))
		w.recordGone = w.recordGone || mine
		return false
	case err == nil && le.keepsPrevious(rec, now):
		// Re-created without a record: not a release either.
		le.log.Info("the lock object was replaced by one without a record while held; keeping the holder's lease",
			zap.String("holder", le.GetLeader()))
		w.recordGone = w.recordGone || mine
		return false
	case err == nil:
		le.observe(rec, raw, now)
		if rec.HolderIdentity != "" && rec.HolderIdentity != le.cfg.Lock.Identity() && !le.worthTrying() {
			// A live holder this candidate may not take from: the next
			// attempt would find the lock held, so an earlier failure no
			// longer describes the present.
			le.setLastError(nil)
		}
	case raw != nil:
		le.observeCorrupt(raw, err, now)
	default:
		le.log.Warn("ignoring a watch event", zap.Error(err))
		return false
	}
	return true
}
