package elector

import (
	"errors"

	"go.uber.org/zap"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockwatch"
)

// lockWatch follows the lock object through its hub's shared watch of
// its kind and namespace (Config.Hub): a lockwatch.Follower queues what
// the hub delivers, and the election loop takes it (ingest) when it is
// ready, so the lock is only ever touched by the loop.
type lockWatch struct {
	*lockwatch.Follower
	le   *LeaderElector
	lock lockcap.Watchable

	// recordGone is set by ingest when the lock object was deleted or
	// replaced by one without a record while this candidate holds it; the
	// leader then writes its record again at once (used by the loop only).
	recordGone bool
}

func newLockWatch(le *LeaderElector, lock lockcap.Watchable) *lockWatch {
	broke := func() { le.log.Info("watch of the lock broke; polling until it is back") }
	return &lockWatch{Follower: lockwatch.NewFollower(broke), le: le, lock: lock}
}

// takeRecordGone reports and clears recordGone.
func (w *lockWatch) takeRecordGone() (gone bool) {
	gone, w.recordGone = w.recordGone, false
	return gone
}

// watchEvents is the channel the election loop selects on; nil (never ready)
// without a watch.
func (le *LeaderElector) watchEvents() <-chan struct{} {
	if le.watch == nil {
		return nil
	}
	return le.watch.Events()
}

// start follows the lock until the returned function is called.
func (w *lockWatch) start() (stop func()) { return w.Start(w.le.cfg.Hub, w.lock) }

// ingest takes what the watch delivered into the lock and the elector's
// observation, in the order delivered. It returns false when there was
// nothing new. When deliveries were dropped unseen, the holder's lease is
// taken as renewed now.
func (w *lockWatch) ingest() bool {
	batch, dropped := w.Take()
	if dropped {
		w.le.refreshObservedLease(w.le.clock.Now())
	}
	changed := false
	for _, d := range batch {
		changed = w.ingestOne(d.Obj, d.Deleted) || changed
	}
	// A version delivered after a write that conflicted is the write it
	// conflicted with, or follows it: the conflict is explained, and the
	// follower waits by what it now sees. Kept, the bound made every
	// candidate that lost the first race for a lock look again a
	// RetryPeriod later for nothing.
	w.le.loop.conflicted = w.le.loop.conflicted && !changed
	return changed
}

// ingestOne takes one delivery; false when it changed nothing.
func (w *lockWatch) ingestOne(obj any, deleted bool) bool {
	le := w.le
	now := le.clock.Now()
	rec, raw, err := w.lock.Observe(obj, deleted)
	switch {
	case err == nil && deleted:
		le.noteEmpty(nil, now) // a look that found no object
	case err == nil:
		le.noteEmpty(rec, now)
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
	case err == nil && noRecord(rec) && (le.holderMayBeWorking(now) || mine):
		// Re-created without a record: not a release either, while the
		// last holder's lease runs or this candidate leads.
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
