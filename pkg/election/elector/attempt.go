package elector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/protocol/handover"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

type outcome int

const (
	acquired    outcome = iota // the lock is ours now (taken or renewed)
	heldByOther                // someone else holds it and we may not take it (yet)
	failed                     // the API call failed; state unknown
	handOff                    // (leader only) a candidate asked for the lock and we agree
	readNeeded                 // (renew fast path only) the record must be read first
)

// attempt makes one try to take or renew the lock. A follower with a working
// watch decides from the object the watch delivered and does not read from
// the API server at all: when its write conflicts (another candidate wrote
// first, or created the object), the watch is about to deliver that write,
// and the election loop decides again when it does.
func (le *LeaderElector) attempt(ctx context.Context, renewing bool) (outcome, error) {
	if !renewing {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, le.cfg.RenewDeadline)
		defer cancel()
	} else if out, err := le.renewFast(ctx); out != readNeeded {
		return out, err
	}
	fromCache := !renewing && le.watch != nil && le.watch.Healthy()
	le.loop.conflicted = false
	out, err := le.readAndDecide(ctx, renewing, fromCache)
	if fromCache && (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) {
		// Someone else wrote a version the watch had not delivered yet: a
		// read now would only race the watch, which wakes the loop with it.
		// Should the watch deliver nothing (a conflict with no write behind
		// it), the loop tries again a RetryPeriod on (followerWait).
		le.log.Debug("another write came first; waiting for the watch to deliver it", zap.Error(err))
		le.loop.conflicted = true
		return heldByOther, nil
	}
	return out, err
}

// renewFast answers a pending handover request or overwrites the object
// version last written or seen. If anyone else wrote since, the update
// conflicts and it returns readNeeded.
func (le *LeaderElector) renewFast(ctx context.Context) (outcome, error) {
	if out, err := le.answerRequest(ctx); out != readNeeded {
		return out, err
	}
	prev, _ := le.Observed()
	if prev.HolderIdentity != le.cfg.Lock.Identity() {
		return readNeeded, nil
	}
	now := le.clock.Now()
	desired := le.desired(now)
	le.continueTerm(&desired, prev, true, now)
	out, err := le.write(ctx, desired, now)
	if err == nil || ctx.Err() != nil {
		return out, err
	}
	le.cfg.Metrics.SlowPath(le.cfg.Name)
	le.log.Debug("renew without read failed; reading the lock", zap.Error(err))
	return readNeeded, nil
}

// answerRequest lets a leader hand the lock to the coordinator's preferred
// holder, or answer a handover request addressed to it (see
// handover.Role.Respond): handOff when it accepted one, readNeeded when
// there was nothing to act on or when its answer conflicted. A leader
// whose callback is stopping answers nothing.
func (le *LeaderElector) answerRequest(ctx context.Context) (outcome, error) {
	if le.loop.stopping {
		return readNeeded, nil
	}
	h := le.proto.coord.Preferred()
	if h == nil {
		var err error
		if h, err = le.proto.handover.Respond(ctx, le.clock.Now(), le.fence.startAt); err != nil {
			return failed, err
		}
	}
	if h == nil {
		return readNeeded, nil
	}
	le.loop.handTo = h
	return handOff, nil
}

// readAndDecide reads the record (from the watch's cache or the API server)
// and acts on it.
func (le *LeaderElector) readAndDecide(ctx context.Context, renewing, fromCache bool) (outcome, error) {
	var (
		rec *resourcelock.Record
		raw []byte
		err error
	)
	if fromCache {
		rec, raw, err = le.watch.lock.Peek()
		if errors.Is(err, resourcelock.ErrNotInitialized) {
			// The watch has listed and holds no object: there is none. A
			// create that races another one fails, and the attempt reads.
			err = apierrors.NewNotFound(schema.GroupResource{}, le.cfg.Lock.Describe())
		}
	} else {
		rec, raw, err = le.get(ctx)
	}
	// A record is observed when the read returns, not when it was sent: a
	// slow read (a paused process, a slow API server) may return a record
	// written after it was sent, whose lease must not start earlier.
	now := le.clock.Now()
	if err == nil || apierrors.IsNotFound(err) {
		le.noteEmpty(rec, now)
	}
	switch {
	case apierrors.IsNotFound(err) || (err == nil && noRecord(rec)):
		// Deleted or re-created without a record, not released: the holder
		// may still be working. Or a vacancy coordination leaves open.
		if !renewing && (le.holderMayBeWorking(now) || le.emptyMayBeHeld(now, err != nil) || le.proto.coord.LeaveVacant(now)) {
			return heldByOther, nil
		}
		if renewing {
			le.recordDestroyed(now)
		}
		return le.writeFresh(ctx, apierrors.IsNotFound(err), renewing, now)
	case errors.Is(err, resourcelock.ErrCorruptRecord):
		return le.overwriteCorrupt(ctx, renewing, raw, err, now)
	case err != nil:
		return failed, fmt.Errorf("get %s: %w", le.cfg.Lock.Describe(), err)
	}
	le.observe(rec, raw, now)
	return le.decideAndWrite(ctx, renewing, rec, now)
}

// writeFresh writes this candidate's record into a lock that has none:
// creating the object, or updating one that exists without a record. A
// record naming this candidate that it saw last goes on as continueTerm
// says.
func (le *LeaderElector) writeFresh(ctx context.Context, create, renewing bool, now time.Time) (outcome, error) {
	desired := le.desired(now)
	write, verb := le.update, "update"
	if create {
		write, verb = le.create, "create"
	} else {
		desired.LeaderTransitions = 1
	}
	if prev, _ := le.Observed(); prev.HolderIdentity == desired.HolderIdentity {
		le.continueTerm(&desired, prev, renewing, now)
	}
	return le.writeWith(ctx, write, verb, desired, now)
}

// decideAndWrite applies the election rules to the record just read and
// writes this candidate's record when they allow it.
func (le *LeaderElector) decideAndWrite(ctx context.Context, renewing bool, rec *resourcelock.Record, now time.Time) (outcome, error) {
	if rec.HolderIdentity == le.cfg.Lock.Identity() {
		return le.decideOwn(ctx, renewing, rec, now)
	}
	if renewing {
		return heldByOther, nil // the record is not ours any more
	}
	desired := le.desired(now)
	desired.LeaderTransitions = rec.LeaderTransitions + 1
	if rec.HolderIdentity == "" || !le.leaseValid(now) {
		if le.proto.coord.LeaveVacant(now) {
			return heldByOther, nil
		}
		return le.write(ctx, desired, now)
	}
	le.proto.coord.Occupied()
	if le.proto.coord.Coordinated() {
		return heldByOther, nil // the coordinator moves a held lock, never a candidate
	}
	if out, err := le.mayPreempt(ctx, rec, now); out != acquired {
		return out, err
	}
	return le.steal(ctx, rec, desired, now)
}

// decideOwn acts on a record that names this candidate: a leader renews
// it (or answers a request); a follower leads on it unless it belongs to an
// earlier process of this identity, or this holder promised the lock to a
// candidate in its last term.
func (le *LeaderElector) decideOwn(ctx context.Context, renewing bool, rec *resourcelock.Record, now time.Time) (outcome, error) {
	if !renewing {
		if out, decided := le.decideNamed(rec, now); decided {
			return out, nil
		}
		// Handed the lock: answer requests once leading.
	} else if out, err := le.answerRequest(ctx); out != readNeeded {
		return out, err
	}
	desired := le.desired(now)
	le.continueTerm(&desired, *rec, renewing, now)
	return le.write(ctx, desired, now)
}

// continueTerm makes desired, a record naming this candidate that it is
// about to write over prev, which names it too, go on with prev's term
// (acquire time and transitions) when that is the same term: a leader
// renewing, or a candidate whose previous holder named it and so gave it
// that term (a handover, a coordinator's assignment).
//
// A candidate taking back the record of a term it led itself, which has
// ended (its renew deadline passed, or its work ended and the release
// failed), starts a new term instead: transitions one up, acquired now.
// Followers time a lease from when they see the record change, and the
// same term written again may not change it: a lock that stores whole
// seconds, a wall clock stepped back, and the new renew time reads as the
// old one; followers would then time the lease from the old term's last
// renew and take the lock beside this candidate's new work. A term number
// that was never written before is a change every follower sees, however
// the clocks stand and whatever writes its watch coalesced.
//
// A leader renewing writes a renew time that only rises (lockcap.RenewMark),
// and one going on with a term another process wrote starts above that
// process's last renew time (lockcap.InheritRenew).
func (le *LeaderElector) continueTerm(desired *resourcelock.Record, prev resourcelock.Record, renewing bool, now time.Time) {
	desired.LeaderTransitions = prev.LeaderTransitions + 1
	if !renewing && handover.TermKey(&prev) == le.loop.ledTerm {
		return
	}
	desired.AcquireTime, desired.LeaderTransitions = prev.AcquireTime, prev.LeaderTransitions
	if !renewing {
		le.loop.wrote = lockcap.InheritRenew(prev.RenewTime.Time, now)
	}
	desired.RenewTime = metav1.NewTime(le.loop.wrote.Next(now))
}

// decideNamed is for a follower that finds the record naming it: decided
// is false when it is to write its record over it.
func (le *LeaderElector) decideNamed(rec *resourcelock.Record, now time.Time) (out outcome, decided bool) {
	if !le.fence.inherited.IsZero() {
		if now.Before(le.fence.inherited) {
			// An earlier process of this identity wrote the record: it is
			// that process's, whose work may run until its lease has
			// passed by this observation. Leave it as another holder's
			// record: writing it now would renew a dead process's lease
			// and keep the others from taking the lock when it runs out.
			return heldByOther, true
		}
		le.fence.inherited = time.Time{}
	}
	if h := le.proto.handover.Promised(now); h != nil {
		// This holder accepted a request in its last term and its write
		// naming the candidate failed: keep the promise instead of taking
		// the lock back, but not before the fence of a lock it took by
		// force has passed (the candidate starts at once, and the previous
		// holder's work may still run). Until then the lock is left as it
		// is.
		if !le.fence.startAt.After(now) {
			le.handOver(*h, false)
		}
		return heldByOther, true
	}
	if since, ok := le.namedSince(le.proto.handover.AskedAt(), rec, now); ok {
		// Handed the lock on request: the record is a valid term already,
		// and the work starts on it alone.
		le.loop.namedFrom = since
		le.loop.wrote = lockcap.InheritRenew(rec.RenewTime.Time, now)
		le.log.Info("the holder handed the lock over on request; leading on its record")
		return acquired, true
	}
	return 0, false
}

// steal writes desired over rec, whose holder this candidate may preempt
// now, and sets the fence before which its work must not start.
func (le *LeaderElector) steal(ctx context.Context, rec *resourcelock.Record, desired resourcelock.Record, now time.Time) (outcome, error) {
	fence := le.leaseEnd()
	if le.seen().session != "" { // the observed holder's record names a session
		// Whatever this candidate saw of the holder's session, the holder
		// credits only renewals sent before this write (see Session): its
		// term ends within its renew deadline of now unless it sees the
		// steal, and its work then has until a lease from now to stop, as
		// the work of a holder that renews its record has until its lease
		// ends, and StopTimeout at least.
		if end := now.Add(max(le.cfg.LeaseDuration, le.cfg.RenewDeadline+le.cfg.StopTimeout)); end.After(fence) {
			fence = end
		}
	}
	out, err := le.write(ctx, desired, now)
	switch {
	case out == acquired:
		le.stole(rec, fence, now)
	case !apierrors.IsConflict(err):
		// The write may have happened though it failed (a timeout): if the
		// record turns out to name this candidate, it took the lock by force
		// and must keep the fence, and the steal counts for damping.
		le.damper.Stole(now)
		le.fenceAt(fence, now)
	}
	return out, err
}

// mayPreempt decides whether this candidate takes the unexpired lock rec
// from its holder now (acquired); heldByOther when the comparison, the steal
// damper or the handover protocol say no (see package
// internal/protocol/preemption).
func (le *LeaderElector) mayPreempt(ctx context.Context, rec *resourcelock.Record, now time.Time) (outcome, error) {
	outranks := le.cfg.KeyComparison != nil && le.cfg.KeyComparison(rec.HolderKey)
	take, err := le.proto.priority.MayTake(ctx, rec, now, le.seen().termSeenAt, outranks)
	switch {
	case err != nil:
		return failed, err
	case take:
		return acquired, nil
	}
	return heldByOther, nil
}

// stole notes a forced steal: metrics, damper, event, and the fence before
// which the run callback must not start (the old holder's last renew as seen
// here plus its lease), unless Config.StartAtOnceAfterSteal.
func (le *LeaderElector) stole(rec *resourcelock.Record, fence, now time.Time) {
	le.damper.Stole(now)
	le.cfg.Metrics.Stole(le.cfg.Name)
	le.fenceAt(fence, now)
	if le.cfg.StartAtOnceAfterSteal && fence.After(le.fence.startAt) && !le.cfg.KeyComparison(rec.HolderKey) {
		// The comparison changed while the write was under way (a new
		// default seen meanwhile, a pause between the decision and the
		// write): starting at once is a privilege of a candidate that
		// outranks the holder, so the work waits for the fence.
		le.fence.startAt = fence
	}
	msg := fmt.Sprintf("%s took the lock from %s (key %q)", le.cfg.Lock.Identity(), rec.HolderIdentity, rec.HolderKey)
	le.log.Info("took the lock from a lower-priority holder", zap.String("holder", rec.HolderIdentity),
		zap.String("holderKey", rec.HolderKey), zap.Time("workStartsAt", le.fence.startAt))
	le.cfg.Lock.RecordEvent(corev1.EventTypeNormal, reasonLeaderElection, msg)
}

// recordDestroyed is called when this holder finds its lock object missing
// or without a record. It writes its record again, but cannot tell whether
// another candidate took the empty object meanwhile and lost it the same
// way (a second deletion or re-creation): such a holder's record is gone,
// and its work may run until a lease after its last renew, which was
// before now. So the run callback of this term, if it has not started,
// starts no earlier than a lease from now, and a successor this holder
// names is told to wait as long.
func (le *LeaderElector) recordDestroyed(now time.Time) {
	le.fenceAt(now.Add(le.cfg.LeaseDuration), now)
}

// fenceAt makes the run callback of the coming term start no earlier than
// fence, unless Config.StartAtOnceAfterSteal; a later fence already set
// stays.
func (le *LeaderElector) fenceAt(fence, now time.Time) {
	if !le.cfg.StartAtOnceAfterSteal && fence.After(now) && fence.After(le.fence.startAt) {
		le.fence.startAt = fence
	}
}

// write stores desired over the version last read.
func (le *LeaderElector) write(ctx context.Context, desired resourcelock.Record, now time.Time) (outcome, error) {
	return le.writeWith(ctx, le.update, "update", desired, now)
}

// writeWith stores desired by send (create or update) and remembers it once
// stored; a failure is wrapped with verb and the lock's description, and
// leaves the record last observed as it was.
func (le *LeaderElector) writeWith(ctx context.Context, send func(context.Context, resourcelock.Record) error, verb string,
	desired resourcelock.Record, now time.Time) (outcome, error) {
	if err := send(ctx, desired); err != nil {
		return failed, fmt.Errorf("%s %s: %w", verb, le.cfg.Lock.Describe(), err)
	}
	le.observeOwnWrite(desired, now)
	return acquired, nil
}

// desired is the record this candidate writes when it takes the lock now.
func (le *LeaderElector) desired(now time.Time) resourcelock.Record {
	return resourcelock.Record{
		HolderIdentity:       le.cfg.Lock.Identity(),
		HolderKey:            le.cfg.Lock.Key(),
		LeaseDurationSeconds: le.leaseSeconds(),
		AcquireTime:          metav1.NewTime(now),
		RenewTime:            metav1.NewTime(now),
	}
}

// overwriteCorrupt handles a record that cannot be decoded. A follower
// treats it as held by an unknown holder that expires LeaseDuration after the
// bytes were first seen; a leader repairs it at once, since whoever broke it
// cannot be a holder that this elector would recognise.
func (le *LeaderElector) overwriteCorrupt(ctx context.Context, renewing bool, raw []byte, cause error, now time.Time) (outcome, error) {
	firstSeen, prev := le.observeCorrupt(raw, cause, now)
	if !renewing && now.Before(firstSeen.Add(le.cfg.LeaseDuration)) {
		return heldByOther, nil
	}
	desired := le.desired(now)
	if renewing && prev.HolderIdentity == desired.HolderIdentity {
		desired.AcquireTime, desired.LeaderTransitions = prev.AcquireTime, prev.LeaderTransitions
	} else {
		desired.LeaderTransitions = prev.LeaderTransitions + 1
	}
	return le.writeWith(ctx, le.update, "replace corrupt record in", desired, now)
}

// get, create and update call the lock and count the request.
func (le *LeaderElector) get(ctx context.Context) (*resourcelock.Record, []byte, error) {
	le.cfg.Metrics.Request(le.cfg.Name, "get")
	return le.cfg.Lock.Get(ctx)
}

func (le *LeaderElector) create(ctx context.Context, r resourcelock.Record) error {
	le.markSession(r)
	le.cfg.Metrics.Request(le.cfg.Name, "create")
	return le.cfg.Lock.Create(ctx, r)
}

func (le *LeaderElector) update(ctx context.Context, r resourcelock.Record) error {
	le.markSession(r)
	le.cfg.Metrics.Request(le.cfg.Name, "update")
	return le.cfg.Lock.Update(ctx, r)
}
