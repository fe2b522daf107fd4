package elector

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/meshd-io/meshd/internal/election/ordered"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/ownstack"
	"github.com/meshd-io/meshd/internal/protocol/handover"
)

// term is one term of leadership: the run callback and how it ended.
type term struct {
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the callback has returned; nil before it started
	err    error         // the callback's result, valid once done is closed
	// renew's timers, stopped by endTerm
	fence        clockTimer // fires at the fence; nil once the callback may start
	timer        clockTimer // fires at the next renew
	startOnRenew bool       // the fence passed; start after the next successful renew
}

// termEnd says how a term ended.
type termEnd struct {
	// stillHeld: the record still names this candidate.
	stillHeld bool
	// handTo: a candidate asked for the lock and this holder accepted.
	handTo *lockmeta.Handover
	// byCallback: the callback returned or panicked while the term was on.
	byCallback bool
	// expire: leave the lock to expire rather than release it or hand it
	// over (see holdUntilFence).
	expire bool
	// brief: name the candidate that asked with a brief lease (see
	// briefLeaseSeconds) rather than a full one.
	brief bool
}

// lead runs one term: starts the callback (after the fence, when the lock
// was taken by force), renews until the term ends, stops the callback while
// still renewing, and then hands the lock over or releases it.
//
// lead stays on the stack for the whole term, so what it does besides
// renewing is in beginTerm and endTerm: a small frame (see the package
// doc, The stack of a waiting candidate).
func (le *LeaderElector) lead(ctx context.Context) {
	t := le.beginTerm(ctx)
	defer t.cancel()
	le.endTerm(ctx, t, le.renew(ctx, t))
}

// beginTerm starts a term: the term's context, the leading state, the metric
// and the event.
func (le *LeaderElector) beginTerm(ctx context.Context) *term {
	t := &term{}
	t.ctx, t.cancel = context.WithCancel(ctx)
	le.setLeading(true)
	le.cfg.Metrics.Acquired(le.cfg.Name)
	le.cfg.Lock.RecordEvent(corev1.EventTypeNormal, reasonLeaderElection, le.cfg.Lock.Identity()+" became leader")
	return t
}

// endTerm ends a term the way renew says it ended: it stops the callback while
// still renewing, waits out the fence if the lock is to be given away
// before it, hands the lock over or releases it, and reports.
func (le *LeaderElector) endTerm(ctx context.Context, t *term, end *termEnd) {
	if t.fence != nil {
		t.fence.Stop()
	}
	t.timer.Stop()
	le.setLeading(false)
	le.loop.stopping = true // renew while the work stops, answer nothing
	le.stopWork(t, end)
	le.holdUntilFence(ctx, t, end)
	le.loop.stopping = false
	le.finish(*end)
	le.cfg.Lock.RecordEvent(corev1.EventTypeNormal, reasonLeaderElection, le.cfg.Lock.Identity()+" stopped leading")
	if le.cfg.Callbacks.OnStoppedLeading != nil {
		le.cfg.Callbacks.OnStoppedLeading()
	}
}

// startCallback runs the callback in its own goroutine. A panic is not
// recovered: supervising the work is the caller's (package election
// recovers every run function and turns a panic into an error).
func (le *LeaderElector) startCallback(t *term) {
	t.done = make(chan struct{})
	go func() {
		defer close(t.done)
		t.err = le.cfg.Callbacks.OnStartedLeading(t.ctx)
	}()
}

// fenceTimer starts the callback now, or returns a timer that fires when
// it may start: after a forced steal, or a lease that a record did not end
// (fenceNamedOver), when the old holder's work must have stopped. The
// caller stops the timer.
func (le *LeaderElector) fenceTimer(t *term) clockTimer {
	wait := le.fence.startAt.Sub(le.clock.Now())
	if wait <= 0 {
		le.startCallback(t)
		return nil
	}
	le.log.Info("holding the lock; the run callback starts once the previous holder's lease has run out",
		zap.Duration("wait", wait))
	return le.clock.NewTimer(wait)
}

// fencePassed is called when the fence has passed. The holder may not
// have seen another holder take the lock while it waited: a polling holder
// learns of writes only when it renews, and a watch may hand such a write
// over late (a lagging watch) or after a list older than it (after a
// break). So the callback starts only once a renew written now has shown
// the lock still held: fencePassed takes in what the watch delivered and
// ends the term if that shows another holder; otherwise the caller renews
// at once, with a write (never one left to the session), and starts the
// callback once a renew succeeded.
func (le *LeaderElector) fencePassed() *termEnd {
	if le.watch != nil {
		if end := le.leaderSawEvent(); end != nil {
			return end
		}
	}
	le.loop.watchEpoch, le.loop.wroteVersion = 0, "" // renewedBySession is false until this holder has written
	le.log.Info("the previous holder's lease has run out; renewing before the run callback starts")
	return nil
}

// renew keeps the lock until ctx is cancelled, the term is lost (another
// holder appeared, or no renew succeeded for RenewDeadline), a candidate is
// granted the lock, or the callback returns.
func (le *LeaderElector) renew(ctx context.Context, t *term) *termEnd {
	// The timers are the term's, stopped when it ends: no defer here, which
	// would make this frame larger (see the package doc, The stack of a
	// waiting candidate).
	t.fence, t.timer = le.fenceTimer(t), le.clock.NewTimer(le.nextRenew())
	// A request may already wait: one addressed to this candidate while the
	// previous holder was handing the lock to it.
	if le.proto.handover.Pending() {
		if end := le.renewNow(ctx, t); end != nil {
			return end
		}
	}
	for {
		// The wait is made here, and what follows it in renewWoke, on a
		// goroutine of its own, so that a waiting leader's stack stays
		// small (package doc, The stack of a waiting candidate).
		woke := ordered.First6(ctx.Done(), le.watchEvents(), t.done, timerC(t.fence), le.trigger, t.timer.C())
		if woke == 5 && le.renewedInPlace(t) {
			continue
		}
		if end := ownstack.Call(func() *termEnd { return le.renewWoke(ctx, woke, t) }); end != nil {
			return end
		}
	}
}

// renewedInPlace takes a renew tick that the session's heartbeat answered
// (no request, nothing to start) on renew's own goroutine: the check is
// shallow, and a goroutine of its own would cost a start and a thread
// woken at every tick of every election. False leaves the tick to
// renewWoke.
func (le *LeaderElector) renewedInPlace(t *term) bool {
	if t.startOnRenew || !le.renewedBySession() || le.clock.Since(le.loop.lastRenew) >= le.cfg.RenewDeadline {
		return false
	}
	t.timer.Reset(le.nextRenew())
	return true
}

// renewNow makes one renew attempt and starts the callback if the fence
// passed and the renew succeeded; it returns the end of the term, or nil
// while it goes on.
func (le *LeaderElector) renewNow(ctx context.Context, t *term) *termEnd {
	if end := le.renewOnce(ctx); end != nil {
		return end
	}
	// A renew that did not end the term either succeeded (no error: still
	// the holder) or failed (try again at the next renew).
	if t.startOnRenew && le.LastError() == nil {
		t.startOnRenew = false
		if t.fence = le.fenceLeft(); t.fence == nil { // else this renew moved the fence
			le.startCallback(t)
		}
	}
	t.timer.Reset(le.nextRenew())
	return nil
}

// renewWoke acts on the next thing that happened to a leader, woke, the
// index of the channel renew's wait took, renewing now if it calls for a
// renew: it returns the end of the term, or nil to wait again. Of several
// things that happened at once, the wait takes them in a fixed order
// (package ordered): cancellation, a watch delivery, the callback's
// return, the fence, a trigger, the renew timer; a delivery showing the
// lock taken is seen before a renewal or a start it would prevent.
func (le *LeaderElector) renewWoke(ctx context.Context, woke int, t *term) *termEnd {
	switch woke {
	case 0:
		return &termEnd{stillHeld: true}
	case 1:
		if end := le.leaderSawEvent(); end != nil {
			return end
		}
		// Renew at once to answer a request, or to write the record again
		// into a lock object deleted or re-created.
		if gone := le.watch.takeRecordGone(); !gone && !le.proto.handover.Pending() {
			return nil
		}
	case 2:
		// What the callback returned is the caller's to report (package
		// election logs it, counts it and backs off).
		le.log.Debug("the run callback returned; ending the term", zap.Bool("failed", t.err != nil))
		return &termEnd{stillHeld: true, byCallback: true}
	case 3:
		if t.fence = le.fenceLeft(); t.fence != nil {
			return nil // the fence moved (see recordDestroyed)
		}
		if end := le.fencePassed(); end != nil {
			return end
		}
		t.startOnRenew = true
	}
	// A trigger (the comparison may have changed: reconsider a refused
	// request), the renew timer, or the fence passed.
	t.timer.Stop()
	return le.renewNow(ctx, t)
}

// leaderSawEvent ingests a watch event while leading; it returns the end
// of the term when the event shows another holder.
func (le *LeaderElector) leaderSawEvent() *termEnd {
	if !le.watch.ingest() {
		return nil
	}
	if holder := le.GetLeader(); holder != le.cfg.Lock.Identity() {
		le.lostTo()
		return &termEnd{}
	}
	if h := le.proto.coord.Preferred(); h != nil && !le.loop.stopping {
		le.log.Info("the coordinator prefers another holder; handing the lock over once the work stopped",
			zap.String("candidate", h.Candidate), zap.String("candidateKey", h.CandidateKey))
		return &termEnd{stillHeld: true, handTo: h}
	}
	return nil
}

// renewOnce makes one renew attempt; it returns the end of the term, or nil
// while it goes on.
func (le *LeaderElector) renewOnce(ctx context.Context) *termEnd {
	bySession := le.renewedBySession()
	remaining := le.cfg.RenewDeadline - le.clock.Since(le.loop.lastRenew)
	if remaining <= 0 {
		le.log.Warn("renew deadline passed; stopping leadership", zap.Duration("renewDeadline", le.cfg.RenewDeadline))
		return &termEnd{}
	}
	if bySession {
		return nil // the session's heartbeat renewed the term
	}
	attemptCtx, cancel := context.WithTimeout(ctx, remaining)
	out, err := le.attempt(attemptCtx, true)
	cancel()
	le.setLastError(err)
	switch out {
	case acquired:
		// Never back: a session's heartbeat may have moved it further.
		if from := le.loop.wrote.DeadlineFrom(le.cfg.timing()); from.After(le.loop.lastRenew) {
			le.loop.lastRenew = from
		}
	case heldByOther:
		le.lostTo()
		return &termEnd{}
	case handOff:
		le.log.Info("handing the lock over on request", zap.String("candidate", le.loop.handTo.Candidate), zap.String("candidateKey", le.loop.handTo.CandidateKey))
		return &termEnd{stillHeld: true, handTo: le.loop.handTo}
	case failed:
		if ctx.Err() != nil {
			return &termEnd{stillHeld: true}
		}
		le.cfg.Metrics.RenewFailed(le.cfg.Name)
		le.log.Warn("failed to renew", zap.Error(err))
	}
	return nil
}

// lostTo notes that another holder took the lock. It counts as stolen, for
// the steal damper, only while this holder's own lease was still valid: a
// holder that took over after the lease ran out did nothing wrong.
func (le *LeaderElector) lostTo() {
	rec, _ := le.Observed()
	le.log.Info("another holder took the lock; stopping leadership at once", zap.String("holder", rec.HolderIdentity))
	now := le.clock.Now()
	if rec.HolderIdentity != "" && now.Before(le.loop.lastRenew.Add(le.cfg.LeaseDuration)) {
		disputed := le.cfg.KeyComparison != nil && le.cfg.KeyComparison(rec.HolderKey)
		le.damper.Stolen(now, rec.HolderKey, disputed)
	}
}

// nextRenew is the wait before the next renew: RetryPeriod, but never past
// the renew deadline, so that a leader whose renewals keep failing ends its
// term RenewDeadline after its last successful renew, not up to a
// RetryPeriod later. The clock-skew tolerance, LeaseDuration -
// RenewDeadline, depends on it.
//
// When less than a RetryPeriod is left (the write that won the term took a
// long time, or renewals failed), the next attempt comes at half the time
// left, so that there is still a renew before the deadline; only in the last
// quarter of a RetryPeriod does the elector just wait for the deadline.
func (le *LeaderElector) nextRenew() time.Duration {
	left := le.cfg.RenewDeadline - le.clock.Since(le.loop.lastRenew)
	switch {
	case left <= 0:
		return 0
	case left > le.cfg.RetryPeriod:
		return le.cfg.RetryPeriod
	case left > le.cfg.RetryPeriod/4:
		return left / 2
	default:
		return left
	}
}

// stopWork cancels the callback and waits for it to return, renewing the
// lock meanwhile so that no successor starts beside it. A callback that
// outlives StopTimeout keeps the lock held, makes Check fail and is
// reported every LeaseDuration; the wait has no other bound.
func (le *LeaderElector) stopWork(t *term, end *termEnd) {
	t.cancel()
	if t.done == nil {
		return
	}
	overdue := le.clock.NewTimer(le.cfg.StopTimeout)
	defer overdue.Stop()
	renewT := le.clock.NewTimer(le.nextRenew())
	defer renewT.Stop()
	for {
		select {
		case <-t.done:
			le.setStuck(false)
			return
		case <-overdue.C():
			le.setStuck(true)
			le.log.Error("the run callback has not stopped; keeping the lock so that no successor starts beside it, and failing the health check",
				zap.Duration("stopTimeout", le.cfg.StopTimeout), zap.Bool("lockHeld", end.stillHeld))
			le.cfg.Lock.RecordEvent(corev1.EventTypeWarning, reasonRunStuck, "run callback has not stopped within "+le.cfg.StopTimeout.String())
			overdue.Reset(le.cfg.LeaseDuration)
		case <-renewT.C():
			le.holdWhileStopping(end)
			if end.stillHeld {
				renewT.Reset(le.nextRenew())
			}
		case <-le.watchEvents():
			// Only a lock object deleted or re-created without a record
			// makes the leader write its record again before its next renew.
			if le.watch.ingest(); le.watch.takeRecordGone() && end.stillHeld {
				renewT.Stop()
				le.holdWhileStopping(end)
				renewT.Reset(le.nextRenew())
			}
		}
	}
}

// holdUntilFence is for a lock taken by force whose callback has not
// started because the previous holder's work may still run: a successor
// named now, or anyone taking a released lock, would start beside that
// work. A handover waits for the fence, renewing meanwhile, unless the
// accepted request carries the fence to a successor that waits it out; a
// release, or a handover whose wait ctx cuts short, becomes leaving the lock
// to expire: others then wait a lease from this holder's last renew, past
// the fence.
func (le *LeaderElector) holdUntilFence(ctx context.Context, t *term, end *termEnd) {
	wait := le.fence.startAt.Sub(le.clock.Now())
	if t.done != nil || wait <= 0 || !end.stillHeld || !le.givesAway(*end) || le.proto.handover.CarriesFence(end.handTo, wait) {
		return
	}
	if end.handTo == nil || ctx.Err() != nil {
		le.log.Info("leaving the lock to expire: the previous holder's work may still run", zap.Duration("fenceIn", wait))
		end.expire = true
		return
	}
	le.log.Info("giving the lock up once the previous holder's lease has run out", zap.Duration("wait", wait))
	fence := le.clock.NewTimer(wait)
	defer fence.Stop()
	renewT := le.clock.NewTimer(le.nextRenew())
	defer renewT.Stop()
	for end.stillHeld {
		select {
		case <-fence.C():
			// The candidate asked a while ago and may be gone (a crash
			// cannot take a request back). Name it all the same, so that
			// a lesser candidate does not take a released lock first,
			// but with a brief lease: a candidate that is gone holds the
			// election up for that long, not for a full lease.
			le.log.Info("the previous holder's lease has run out; handing over with a brief lease, as the candidate asked a while ago",
				zap.String("candidate", end.handTo.Candidate), zap.Int("leaseSeconds", le.briefLeaseSeconds()))
			end.brief = true
			return
		case <-ctx.Done():
			end.expire = true
			return
		case <-renewT.C():
			le.holdWhileStopping(end)
			renewT.Reset(le.nextRenew())
		}
	}
}

// givesAway reports whether finish hands the lock over or releases it
// (rather than leaving it to expire).
func (le *LeaderElector) givesAway(end termEnd) bool {
	return end.handTo != nil || end.byCallback || le.cfg.ReleaseOnCancel
}

// holdWhileStopping renews the lock while the callback stops.
func (le *LeaderElector) holdWhileStopping(end *termEnd) {
	if !end.stillHeld {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), le.cfg.RenewDeadline)
	defer cancel()
	if lost := le.renewOnce(ctx); lost != nil {
		le.log.Error("lost the lock while the run callback is still stopping")
		*end = termEnd{}
	}
}

// finish ends the term's hold on the lock: hands it over to the candidate
// that was granted it, or to an entitled candidate that asked meanwhile;
// releases it after a cancel with ReleaseOnCancel or when the callback
// ended the term; otherwise (or when holdUntilFence said so) leaves it to
// expire, which in session mode takes one more write (see leaveSession).
func (le *LeaderElector) finish(end termEnd) {
	switch {
	case !end.stillHeld:
		le.cfg.Metrics.Lost(le.cfg.Name)
	case end.expire:
		le.leaveSession()
	case end.handTo != nil && end.handTo.RequestTime == nil:
		// A coordinator's preference, taken when the term began to end:
		// the work has stopped since, and the preferred holder may have
		// gone. Ask again who is live, so that the lock is not handed to
		// a candidate that will not take it (a lease without a leader).
		le.handOverOrRelease(le.proto.coord.Directed(), end.brief)
	case end.handTo != nil:
		le.handOver(*end.handTo, end.brief)
	case end.byCallback || le.cfg.ReleaseOnCancel:
		h := le.proto.handover.Successor(le.clock.Now())
		if h == nil {
			h = le.proto.coord.Directed()
		}
		le.handOverOrRelease(h, false)
	default:
		le.leaveSession()
	}
}

// release writes an empty holder with a one-second lease so that others may
// take the lock at once. It retries after conflicts as long as the record is
// still ours.
func (le *LeaderElector) release() {
	if !le.writeSuccessor(lockmeta.Handover{}, false, "released the lock") {
		le.leaveSession()
	}
}

// handOverOrRelease hands the lock over to h's candidate, or releases it
// when h is nil.
func (le *LeaderElector) handOverOrRelease(h *lockmeta.Handover, brief bool) {
	if h == nil {
		le.release()
		return
	}
	le.handOver(*h, brief)
}

// handOver writes the record naming the candidate that asked for the lock,
// so that it, and only it, takes over at once; with a brief lease when
// brief is set.
func (le *LeaderElector) handOver(h lockmeta.Handover, brief bool) {
	if le.writeSuccessor(h, brief, "handed the lock over") {
		le.cfg.Metrics.HandedOver(le.cfg.Name)
		le.cfg.Lock.RecordEvent(corev1.EventTypeNormal, reasonLeaderElection,
			fmt.Sprintf("%s handed the lock over to %s (key %q)", le.cfg.Lock.Identity(), h.Candidate, h.CandidateKey))
	}
}

// writeSuccessor ends this holder's record: with an empty Handover it
// releases the lock (empty holder, one-second lease); otherwise it names the
// candidate h.Candidate as holder, provided the request still stands, with
// a full lease or, when brief is set, a brief one. It returns whether the
// write happened.
func (le *LeaderElector) writeSuccessor(h lockmeta.Handover, brief bool, done string) bool {
	seconds := le.leaseSeconds()
	if brief {
		seconds = le.briefLeaseSeconds()
	}
	ctx, cancel := context.WithTimeout(context.Background(), le.cfg.RenewDeadline)
	defer cancel()
	for i := 0; i < releaseAttempts; i++ {
		prev, _ := le.Observed()
		if prev.HolderIdentity != le.cfg.Lock.Identity() {
			return false
		}
		if !le.proto.handover.Stands(h) {
			le.log.Info("the handover request changed; releasing instead")
			h, done = lockmeta.Handover{}, "released the lock"
		}
		now := le.clock.Now()
		next := handover.SuccessorRecord(prev, h, seconds, now)
		err := le.update(ctx, next)
		if err == nil {
			le.observeOwnWrite(next, now)
			le.log.Info(done, zap.String("successor", h.Candidate))
			return true
		}
		if !apierrors.IsConflict(err) {
			le.log.Warn("could not end the term cleanly", zap.String("successor", h.Candidate), zap.Error(err))
			if ctx.Err() != nil {
				return false
			}
			// A failed write (a 500, a timeout) is tried again: a candidate
			// that was promised the lock waits for this write. If the
			// write happened after all, the next one conflicts.
			continue
		}
		rec, raw, err := le.get(ctx)
		if err != nil {
			le.log.Warn("failed to read the lock after a conflict", zap.Error(err))
			return false
		}
		le.observe(rec, raw, le.clock.Now())
	}
	le.log.Warn("gave up ending the term after repeated conflicts", zap.Int("attempts", releaseAttempts))
	return false
}

// briefLeaseSeconds is the lease, in whole seconds, of a successor named
// at the fence on a request made a while before (see holdUntilFence): a
// RetryPeriod, rounded up. A live candidate looks at the lock when the stop
// it was promised is due (see Handover.WakeAt) and renews; one that
// has gone keeps the election without a leader for that long, which fits
// in the RetryPeriod that failover allows beyond a lease.
func (le *LeaderElector) briefLeaseSeconds() int {
	return min(ceilSeconds(le.cfg.RetryPeriod), le.leaseSeconds())
}

// fenceLeft returns a timer for what is left of the fence, or nil once it
// has passed.
func (le *LeaderElector) fenceLeft() clockTimer {
	if wait := le.fence.startAt.Sub(le.clock.Now()); wait > 0 {
		return le.clock.NewTimer(wait)
	}
	return nil
}
