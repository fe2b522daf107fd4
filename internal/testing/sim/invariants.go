package sim

import (
	"fmt"
	"time"

	"github.com/meshd-io/meshd/pkg/election/elector"
)

// livenessBound is how long the election may stay without a leader once
// every fault has ended: LeaseDuration + RetryPeriod when every candidate
// follows the lock with a working watch; with polling candidates (or after
// watch and API faults, which make watching candidates poll until their
// watch is back) a lease observed up to one jittered retry late, expiring
// one jittered retry before it is noticed: LeaseDuration + 2 x (1 +
// JitterFactor) x RetryPeriod.
func (w *World) livenessBound() time.Duration {
	t := w.sched.Timing
	if w.loose {
		return t.LeaseDuration + time.Duration(2*(1+elector.JitterFactor)*float64(t.RetryPeriod))
	}
	return t.LeaseDuration + t.RetryPeriod
}

// excuse tells why an overlap of starter's new work with work wk is beyond
// what meshd can prevent, or "" when it is not: see unavoidable and
// recordDestroyedForIstiod. Nothing else is excused.
func (w *World) excuse(wk work, starter string, now time.Time) string {
	switch {
	case w.unavoidable(wk, now):
		return fmt.Sprintf("it was told to stop at %v and overran, its lock taken or its holder cut off from the API", wk.cancelled.Sub(epoch))
	case w.recordDestroyedForIstiod(wk.actor, starter):
		return "the lock object was re-created without its record, and " + starter + " (client-go's shape) took the empty object"
	case w.stolenAtOnce(wk, starter, now):
		return "a candidate that starts at once (StartAtOnceAfterSteal), as client-go's shape does, took the lock by force less than a lease ago"
	}
	return ""
}

// stolenAtOnce reports whether an overlap of starter with work wk is the
// trade of StartAtOnceAfterSteal. With that option a candidate does what a
// holder of client-go's shape does, and the library documents the trade:
// after taking the lock by force it starts without waiting for the old
// holder's work to stop (the fence that it skips protects any work still
// stopping). Excused, for a lease after such a steal:
//
//   - the victim's work, against any starter: the victim learns of the
//     steal at its next renew and stops within StopTimeout, all within a
//     lease, and whoever the lock goes to next may start meanwhile;
//   - against the thief itself, any other work still running when it
//     started: the fence it skips waits out the lease of the holder it
//     took the lock from, by which the work of every earlier term has
//     stopped, whether its holder already knew it had lost the lock or
//     not (a holder whose lock was re-created empty and taken by
//     client-go's shape learns of it only at its next renew), and work of
//     an earlier process of its own identity that had been told to stop;
//   - the thief's work, against the victim starting after the steal on the
//     record it had been given before it (a handover or a coordinator named
//     it, and it leads on that record without a write): it sees the steal
//     at its next look and stops, and that work, too, ends within the lease
//     the fence would have waited out.
//
// Nothing else is: work that ended its term by a handover, by an expired or
// released lock, or more than a lease ago is checked as before.
func (w *World) stolenAtOnce(wk work, starter string, now time.Time) bool {
	if !w.sched.StartAtOnce {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	recent := func(j int) bool { return now.Sub(epoch)-w.records[j].At < w.sched.Timing.LeaseDuration }
	// The starter's term: its records at the end of the log.
	i := len(w.records) - 1
	for i >= 0 && w.records[i].Holder == starter && !w.records[i].Deleted {
		i--
	}
	if i >= 0 && i+1 < len(w.records) && (wk.actor != starter || !wk.cancelled.IsZero()) && recent(i+1) && w.forcedTakeLocked(i+1) {
		return true
	}
	if thief, ok := w.takenByForceLocked(starter, recent); ok && thief == wk.actor {
		return true
	}
	_, ok := w.takenByForceLocked(wk.actor, recent)
	return ok
}

// takenByForceLocked reports whether the last record naming victim was
// followed, less than a lease ago (recent), by a candidate with
// StartAtOnceAfterSteal taking the lock from it by force, and who. Called
// with mu held.
func (w *World) takenByForceLocked(victim string, recent func(int) bool) (thief string, ok bool) {
	i := len(w.records) - 1
	for i >= 0 && (w.records[i].Holder != victim || w.records[i].Deleted) {
		i--
	}
	if i < 0 {
		return "", false
	}
	j := i + 1
	for j < len(w.records) && w.records[j].Writer == "" { // the world's writes
		j++
	}
	if j < len(w.records) && recent(j) && w.forcedTakeLocked(j) {
		return w.records[j].Holder, true
	}
	return "", false
}

// forcedTakeLocked reports whether record j is a candidate with
// StartAtOnceAfterSteal taking the lock by force: its own write over a
// record naming another holder whose lease had not run out (that holder
// wrote or was given the record less than a lease before; with sessions,
// whose holders do not write their record again, the thief outranks the
// holder's key by its own view of the default). Called with mu held.
func (w *World) forcedTakeLocked(j int) bool {
	took := w.records[j]
	// Back over the world's deletion and re-creation of the object without
	// a record: a thief that still counts the destroyed record's lease (as
	// meshd does, and a MultiLock whose other object keeps the record)
	// takes the lock from that record's holder.
	k := j - 1
	for k > 0 && w.records[k].Writer == "" && (w.records[k].Holder == "" || w.records[k].Deleted) {
		k--
	}
	before := w.records[k]
	victim := before.Holder
	if took.Writer != took.Holder || took.Holder == "" || took.Deleted || before.Deleted || victim == "" ||
		victim == took.Holder || w.isIstiod(took.Holder) {
		return false
	}
	if thief := w.find(took.Holder); thief != nil && thief.spec.Session &&
		outranks(thief.spec.Revision, thief.spec.Remote, before.Key, thief.currentView()) {
		return true
	}
	// The start of the victim's lease or its last renewal: its own last
	// write of the record, or the write that gave it the lock (a handover
	// or a coordinator). Others write handover requests into the record
	// too; those renew nothing.
	for i := k; i >= 0; i-- {
		r := w.records[i]
		if r.Holder == victim && !r.Deleted && (r.Writer == victim || i == 0 || w.records[i-1].Holder != victim) {
			return took.At-r.At < w.sched.Timing.LeaseDuration
		}
	}
	return false
}

// recordDestroyedForIstiod reports whether starter, a holder of client-go's
// shape, took the lock straight from an object that the world re-created
// without a record (Recreate), and the record so destroyed named holder.
//
// A client-go elector takes an empty record at once, and nothing a meshd
// holder does can stop it: the meshd holder writes its record again as
// soon as its watch shows the re-created object (or at its next renew when
// it polls or is cut off), but the other elector may read the empty object
// first. This is an overlap caused by the fault and the foreign elector
// together, and is excused in exactly that shape: the starter is not a
// meshd candidate, its term began with the first write after the
// re-creation (no holder in between), and the overlapped work is that of
// the holder whose record the re-creation destroyed, or of a holder
// before it in a chain of takes by each holder's own write (the holder
// it had taken the lock from, the one that holder had taken it from, and
// so on): each taker's fence protected the stopping work before it, and
// the destroyed record carried the last fence.
func (w *World) recordDestroyedForIstiod(holder, starter string) bool {
	if !w.isIstiod(starter) {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	i := len(w.records) - 1
	for i >= 0 && w.records[i].Holder == starter && w.records[i].Writer == starter {
		i-- // the starter's writes of this term
	}
	// Back over the world's writes: the re-created object and foreign
	// writes on it carry no holder; the deletion carries the record it
	// destroyed.
	for ; i >= 0 && w.records[i].Writer == ""; i-- {
		r := w.records[i]
		switch {
		case r.Deleted && r.Holder == "":
			// The deletion of an object already re-created without a
			// record destroyed nothing: look further back, to the deletion
			// that destroyed a record.
		case r.Deleted:
			return w.inTakeChainLocked(i, r.Holder, holder)
		case r.Holder != "":
			return false
		}
	}
	return false
}

// inTakeChainLocked reports whether holder is thief, whose term the
// record at index end closed, or a holder before it in a chain of takes:
// thief's term began with its own write over a record naming a victim,
// the victim's term began the same way, and so on. Called with mu held.
func (w *World) inTakeChainLocked(end int, thief, holder string) bool {
	for range len(w.records) { // a chain is no longer than the records
		if thief == holder {
			return true
		}
		victim, start := w.takenFromLocked(end, thief)
		if victim == "" {
			return false
		}
		thief, end = victim, start
	}
	return false
}

// takenFromLocked is the holder that thief took the lock from, by its own
// write, to begin the term that the record at index end closed, and the
// index of that write; "" when the term began otherwise (a handover, a
// free or re-created object). Called with mu held.
func (w *World) takenFromLocked(end int, thief string) (victim string, start int) {
	i := end - 1
	for i >= 0 && w.records[i].Holder == thief && !w.records[i].Deleted {
		i--
	}
	if i >= 0 && i+1 < end && w.records[i+1].Writer == thief && w.records[i].Holder != "" && !w.records[i].Deleted {
		return w.records[i].Holder, i + 1
	}
	return "", 0
}

// isIstiod reports whether name is a holder of client-go's shape.
func (w *World) isIstiod(name string) bool {
	for _, s := range w.istiods {
		if s.spec.Name == name {
			return true
		}
	}
	return false
}

// unavoidable tells whether an overlap with work wk is beyond any
// elector's reach, because wk was told to stop and has not, and its holder
// could not keep the lock meanwhile. Either
//
//   - it was told to stop more than LeaseDuration − RenewDeadline ago (so
//     its lease may have run out since) and its holder was cut off from the
//     API (errors or a pause) since shortly before: it could not renew; or
//   - it was told to stop more than StopTimeout ago (it overran its budget)
//     and another actor, not its holder, wrote the record that ended its
//     holder's term: the lock was taken, not given.
//
// Without fencing no elector can prevent either; the work's slowness is
// the fault. A holder that gives the lock away (release, handover) while
// its work still runs is never excused.
func (w *World) unavoidable(wk work, now time.Time) bool {
	t := w.sched.Timing
	if wk.cancelled.IsZero() {
		return false
	}
	if now.Sub(wk.cancelled) > t.LeaseDuration-t.RenewDeadline {
		if st := w.stateOf(wk.actor); st != nil && st.cutOffSince(wk.cancelled.Add(-t.RenewDeadline-t.RetryPeriod)) {
			return true
		}
	}
	return now.Sub(wk.cancelled) > t.StopTimeout && w.takenFrom(wk.actor)
}

// takenFrom reports whether the latest write that ended actor's hold on
// the record was made by someone else.
func (w *World) takenFrom(actor string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	taken, held := false, false
	for _, r := range w.records {
		if r.Deleted {
			continue
		}
		switch {
		case r.Holder == actor:
			held = true
		case held:
			held, taken = false, r.Writer != actor
		}
	}
	return taken && !held
}

// stateOf returns the fault switches of a running actor, or nil.
func (w *World) stateOf(name string) *actorState {
	if c := w.find(name); c != nil {
		return c.state
	}
	for _, s := range w.istiods {
		if s.spec.Name == name {
			return s.state
		}
	}
	return nil
}

// check tests the invariants that hold at every step (overlap is checked
// by the ledger as work starts). The leaderless bound counts only while a
// live candidate is fit to lead (see fitToLead): one whose run functions
// fail, or that backs off after they did, could not keep a term, so an
// election whose only live candidates are such is not one the elector left
// without a leader.
func (w *World) check() {
	now := w.clock.Now()
	busy, _ := w.ledger.busy()
	anyAlive, anyLeading := false, busy
	for _, c := range w.cands {
		anyAlive = anyAlive || (c.alive() && c.fitToLead(now))
		anyLeading = anyLeading || c.leading()
	}
	for _, s := range w.istiods {
		anyAlive = anyAlive || s.alive()
		anyLeading = anyLeading || s.leading()
	}
	// The steal rule decides who should hold a prioritized election, racing
	// or coordinated by meshd; with the oldest-emulation-version strategy
	// Kubernetes' rule decides, and in a per-revision election nobody
	// outranks anybody.
	prioritized := w.sched.Mode != ModeOldest && !w.sched.PerRevision
	outranked := w.sched.CheckPriority && prioritized && w.holderOutranked()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checkPriority(now, outranked)
	if anyLeading || !anyAlive {
		w.lastLeader = now
		return
	}
	if w.faults > 0 || w.hangs > 0 {
		return
	}
	from := w.afterFaults(w.lastLeader)
	if bound := w.livenessBound(); now.Sub(from) > bound {
		w.j.violate("leaderless", "no leader since %v, %v after the last fault ended (bound %v)",
			w.lastLeader.Sub(epoch), now.Sub(from), bound)
		w.lastLeader = now // one report per leaderless stretch
	}
}

// holderOutranked reports whether the holder the record names now is
// outranked, by the default revision every live meshd candidate sees, by
// one of them; false while they disagree, or while no record names a
// holder. A candidate unfit to lead (its run functions fail, or it backs
// off after they did) outranks nobody: it could not keep the election,
// and the bound counts from when it becomes fit. In a coordinated
// election the coordinator, which picks the holder by the default it
// reads, is one more party that must agree: while it sees another default
// than the candidates, it hands the lock to the best candidate by its own
// view, which is no lesser holder.
func (w *World) holderOutranked() bool {
	w.mu.Lock()
	var holderKey string
	holder := ""
	if n := len(w.records); n > 0 && !w.records[n-1].Deleted {
		holder, holderKey = w.records[n-1].Holder, w.records[n-1].Key
	}
	w.mu.Unlock()
	if holder == "" {
		return false
	}
	view, first := "", true
	var live []*candidate
	for _, c := range w.cands {
		if !c.alive() {
			continue
		}
		v := c.currentView()
		if !first && v != view {
			return false
		}
		view, first = v, false
		live = append(live, c)
	}
	if w.sched.coordinated() && view != w.truth {
		return false
	}
	now := w.clock.Now()
	for _, c := range live {
		if c.id != holder && c.fitToLead(now) && outranks(c.spec.Revision, c.spec.Remote, holderKey, view) {
			return true
		}
	}
	return false
}

// checkPriority tests that a holder outranked by a live candidate, while
// every live candidate agrees on the default and no fault is under way,
// keeps the election no longer than the liveness bound. Called with mu
// held.
func (w *World) checkPriority(now time.Time, outranked bool) {
	if !outranked || w.faults > 0 || w.hangs > 0 {
		w.outrankedSince = time.Time{}
		return
	}
	if w.outrankedSince.IsZero() {
		w.outrankedSince = now
		return
	}
	from := w.afterFaults(w.outrankedSince)
	if bound := w.livenessBound(); now.Sub(from) > bound {
		w.j.violate("priority", "the holder has been outranked by a live candidate for %v, since %v, while every candidate agreed on the default (bound %v)",
			now.Sub(from), from.Sub(epoch), bound)
		w.outrankedSince = now // one report per stretch
	}
}

// afterFaults is the later of since and the end of the latest fault: a
// liveness bound counts from there. Called with mu held.
func (w *World) afterFaults(since time.Time) time.Time {
	if w.lastFaultEnd.After(since) {
		return w.lastFaultEnd
	}
	return since
}
