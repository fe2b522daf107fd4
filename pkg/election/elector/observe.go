package elector

import (
	"bytes"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/protocol/handover"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// observe remembers rec if the record changed since it was seen last. Only
// a change of the record itself (holder, key, lease, times, transitions) is
// a sign of life: a new label, a foreign annotation or a handover request
// changes the object but not the record, and must not extend a dead
// holder's lease. Times are compared at the precision the lock stores (a
// Lease keeps microseconds), so two renewals within one second still count.
func (le *LeaderElector) observe(rec *resourcelock.Record, raw []byte, now time.Time) {
	le.mu.Lock()
	if !le.obs.corrupt && !le.obs.time.IsZero() && sameRecord(&le.obs.record, rec) {
		if le.obs.session == "" {
			// The same record written again with a mark that names a
			// session (a successor's first write in the same microsecond
			// as the handover): the session may keep the holder alive
			// longer, never shorter. An edit of the mark alone never
			// shortens the holder's lease.
			le.obs.session = le.proto.session.HolderRef(rec.HolderIdentity)
		}
		le.mu.Unlock()
		return
	}
	first := le.obs.time.IsZero() && !le.obs.corrupt
	le.setObserved(rec, raw, now)
	le.mu.Unlock()
	if first && rec.HolderIdentity == le.cfg.Lock.Identity() && le.proto.session.EarlierProcess() {
		// An earlier process of this identity (a restart) wrote the record,
		// and may still work, or have taken the lock by force with its work
		// fenced, a fence that died with it. This process takes the record
		// as its own only once that record's lease from now has passed (see
		// decideNamed); until then anyone who sees it expire may take it.
		// Only session mode tells: the mark names the session of the
		// process that wrote the record, new with every start, and a record
		// another holder wrote naming this identity (a handover) names
		// none. Without sessions identities are unique per process by
		// default.
		le.fence.inherited = now.Add(honouredLease(*rec))
	}
	if rec.HolderIdentity != "" {
		le.proto.coord.Occupied() // a holder renewed or took it: no longer vacant
	}
	le.proto.session.NoteHolder(rec.HolderIdentity)
	le.reportLeader(rec.HolderIdentity)
	le.warnLongLease(rec)
}

// setObserved takes rec, whose bytes are raw, as the record observed at
// now, replacing a corrupt one. Called with mu held.
func (le *LeaderElector) setObserved(rec *resourcelock.Record, raw []byte, now time.Time) {
	le.noteTerm(rec, now)
	le.obs.record = *rec
	le.obs.raw = raw
	le.obs.time = now
	le.obs.corrupt = false
	le.obs.session = le.proto.session.HolderRef(rec.HolderIdentity)
}

// noteTerm notes when this candidate saw the term of rec's holder begin;
// zero for the term it found when it first looked. Called with mu held.
func (le *LeaderElector) noteTerm(rec *resourcelock.Record, now time.Time) {
	t := handover.TermKey(rec)
	if t == le.obs.term {
		return
	}
	le.obs.termSeenAt = time.Time{}
	if !le.obs.time.IsZero() {
		le.obs.termSeenAt = now
	}
	le.obs.term = t
}

// sameRecord compares two records field by field, times at full precision.
func sameRecord(a, b *resourcelock.Record) bool {
	return a.HolderIdentity == b.HolderIdentity && a.HolderKey == b.HolderKey &&
		a.LeaseDurationSeconds == b.LeaseDurationSeconds && a.LeaderTransitions == b.LeaderTransitions &&
		a.AcquireTime.Equal(&b.AcquireTime) && a.RenewTime.Equal(&b.RenewTime)
}

// noRecord reports whether rec is what an object without any record reads
// as (a ConfigMap without the annotation, a Lease with an empty spec), as
// opposed to a release, which carries a lease and a transition count.
func noRecord(rec *resourcelock.Record) bool {
	return *rec == (resourcelock.Record{})
}

// refreshObservedLease takes the observed holder's lease as renewed at now:
// used when deliveries of the watch were lost, one of which may have been
// a renewal. It delays a takeover by at most one lease and never hastens it.
func (le *LeaderElector) refreshObservedLease(now time.Time) {
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.obs.record.HolderIdentity != "" && !le.obs.time.IsZero() {
		le.obs.time = now
	}
}

// observeOwnWrite remembers a record this candidate just wrote.
func (le *LeaderElector) observeOwnWrite(rec resourcelock.Record, now time.Time) {
	le.loop.emptied.Clear()
	le.loop.watchEpoch, le.loop.wroteVersion = le.loop.writeEpoch, le.cfg.Lock.ResourceVersion() // the epoch noted before the write: a break during it counts
	le.proto.handover.Wrote(now)
	raw := resourcelock.EncodeRecord(rec)
	le.mu.Lock()
	le.loop.wrote = le.loop.wrote.Wrote(rec.RenewTime.Time, now, !bytes.Equal(raw, le.obs.raw))
	le.setObserved(&rec, raw, now)
	le.mu.Unlock()
	le.reportLeader(rec.HolderIdentity)
}

// observeCorrupt notes undecodable record bytes, warning once per new
// content. It returns when they were first seen and the last good record.
func (le *LeaderElector) observeCorrupt(raw []byte, cause error, now time.Time) (time.Time, resourcelock.Record) {
	le.mu.Lock()
	changed := !le.obs.corrupt || !bytes.Equal(raw, le.obs.raw)
	prev := le.obs.record
	if changed {
		le.obs.corrupt = true
		le.obs.raw = raw
		le.obs.time = now
	}
	firstSeen := le.obs.time
	le.mu.Unlock()
	if changed {
		le.log.Warn("lock holds a corrupt record; it will be replaced", zap.Error(cause))
		le.cfg.Lock.RecordEvent(corev1.EventTypeWarning, ReasonCorruptRecord,
			fmt.Sprintf("%v; treated as expired after %v", cause, le.cfg.LeaseDuration))
	}
	return firstSeen, prev
}

// leaseValid reports whether the observed record has not expired by now: it
// expires when observedTime + leaseDurationSeconds < now and, in session
// mode, the holder's session has run out too, or at once when
// Config.HolderExit proves that the holder's process has exited.
func (le *LeaderElector) leaseValid(now time.Time) bool {
	return !le.holderExited() && !le.leaseEnd().Before(now)
}

// leaseEnd is when the observed holder's lease runs out by this candidate's
// observation: its last renew as seen here plus the lease it announced, or
// later while its session lives.
func (le *LeaderElector) leaseEnd() time.Time {
	o := le.seen()
	return le.aliveUntil(le.clock.Now(), o.time.Add(honouredLease(o.record)))
}

// holderMayBeWorking reports whether, by this candidate's observation, the
// lock is held by another holder whose lease has not run out; a corrupt
// record counts as held for LeaseDuration from when it was first seen.
// Deleting the lock object, or replacing it by one without a record, does
// not end such a lease: the holder is not told and goes on working until it
// notices, so the lock is not free before the lease runs out (the holder
// itself writes its record again at its next renew).
func (le *LeaderElector) holderMayBeWorking(now time.Time) bool {
	o := le.seen()
	if o.corrupt {
		return now.Before(o.time.Add(le.cfg.LeaseDuration))
	}
	return o.record.HolderIdentity != "" && o.record.HolderIdentity != le.cfg.Lock.Identity() && le.leaseValid(now)
}

// noteEmpty tells the emptied-lock rule (package internal/election/emptied)
// whether the lock object, as last read or delivered (rec; nil when
// missing), holds a record. Used by the election loop only, before the
// record is observed.
func (le *LeaderElector) noteEmpty(rec *resourcelock.Record, now time.Time) {
	hasRecord := rec != nil && !noRecord(rec)
	if hasRecord {
		le.fenceNamedOver(rec, now)
	}
	le.loop.emptied.Note(hasRecord, rec == nil, lockcap.ObjectUID(le.cfg.Lock), now)
}

// fenceNamedOver is called with a record read or delivered, before it is
// observed, while the record last observed names another holder whose
// lease has not run out by this candidate's observation. Two kinds of
// record leave that holder's term running:
//   - A record naming this candidate that it did not write ends that term
//     only if that holder wrote it: a handover, written once its work had
//     stopped, over its own record in the same lock object, counting one
//     transition more. A record that follows the lock object missing or
//     without a record (the wiped-lock rule kept that holder's lease
//     meanwhile), one in an object created since (a new uid), or one with
//     another count is not: a coordinator assigned a lock it found vacant
//     without having seen that holder's record.
//   - A record of a third holder found while the object counts as emptied:
//     its writer may not have seen that holder's record, destroyed with
//     the object, and its release, its expiry or its process's exit says
//     nothing of that holder's work.
//
// That holder works until it sees such a record, so this candidate's run
// callback, in the next term it leads, starts no earlier than the end of
// that holder's lease, whatever Config.StartAtOnceAfterSteal says (it took
// nothing by force); it holds and renews the lock meanwhile.
func (le *LeaderElector) fenceNamedOver(rec *resourcelock.Record, now time.Time) {
	prev, _ := le.Observed()
	handover := !le.loop.emptied.Seen() && !lockcap.Replaced(le.cfg.Lock) && rec.LeaderTransitions == prev.LeaderTransitions+1
	mine := rec.HolderIdentity == le.cfg.Lock.Identity()
	le.fence.startAt = le.proto.handover.CarriedFence(le.fence.startAt, now, mine && prev.HolderIdentity != rec.HolderIdentity)
	if (mine && !handover || !mine && le.loop.emptied.Seen()) && prev.HolderIdentity != "" && prev.HolderIdentity != rec.HolderIdentity && le.leaseValid(now) {
		if end := le.leaseEnd(); end.After(le.fence.startAt) {
			le.fence.startAt = end
		}
	}
}

// emptyMayBeHeld reports whether a lock object that is missing or holds no
// record, read now, must still count as held (see package
// internal/election/emptied): for LeaseDuration from when this candidate
// first saw it so, as for a corrupt record. The record this candidate last
// saw does not tell how long to wait: the holder may have renewed after it,
// unseen. Only a missing object, by a candidate that never saw a record
// (the first election of a cluster), is taken at once.
func (le *LeaderElector) emptyMayBeHeld(now time.Time, missing bool) bool {
	o := le.seen()
	neverSeen := o.time.IsZero() && !o.corrupt
	held, fresh := le.loop.emptied.Held(now, le.cfg.LeaseDuration, missing && neverSeen)
	if fresh {
		le.log.Info("the lock object is missing or has no record; waiting a lease from now in case a holder works",
			zap.Duration("lease", le.cfg.LeaseDuration))
	}
	return held
}

// honouredLease is the lease of rec that candidates wait for, at most
// MaxLeaseDuration.
func honouredLease(rec resourcelock.Record) time.Duration {
	return time.Duration(min(rec.LeaseDurationSeconds, int(MaxLeaseDuration/time.Second))) * time.Second
}

// leaseSeconds is LeaseDuration in the whole seconds a record stores, rounded
// up: rounding down could tell others to wait less than the renew deadline
// (a lease of 1.9s with a deadline of 1.5s would read as 1s).
func (le *LeaderElector) leaseSeconds() int {
	return ceilSeconds(le.cfg.LeaseDuration)
}

// ceilSeconds is d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int { return int((d + time.Second - 1) / time.Second) }

// warnLongLease reports, once per holder and lease, a record whose lease is
// longer than MaxLeaseDuration.
func (le *LeaderElector) warnLongLease(rec *resourcelock.Record) {
	if rec.LeaseDurationSeconds <= int(MaxLeaseDuration/time.Second) {
		return
	}
	seen := fmt.Sprintf("%s/%d", rec.HolderIdentity, rec.LeaseDurationSeconds)
	if seen == le.loop.warnedLease {
		return
	}
	le.loop.warnedLease = seen
	le.log.Warn("the lock holder wrote a lease longer than the maximum; honouring only the maximum",
		zap.String("holder", rec.HolderIdentity), zap.Int("leaseDurationSeconds", rec.LeaseDurationSeconds), zap.Duration("max", MaxLeaseDuration))
	le.cfg.Lock.RecordEvent(corev1.EventTypeWarning, reasonLeaseTooLong,
		fmt.Sprintf("%s wrote leaseDurationSeconds %d; candidates honour at most %v", rec.HolderIdentity, rec.LeaseDurationSeconds, MaxLeaseDuration))
}

func (le *LeaderElector) reportLeader(identity string) {
	if identity == "" || identity == le.loop.reportedLeader {
		return
	}
	le.loop.reportedLeader = identity
	if le.cfg.Callbacks.OnNewLeader != nil {
		le.cfg.Callbacks.OnNewLeader(identity)
	}
}
