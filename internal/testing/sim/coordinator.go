package sim

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// The coordinator of a coordinated election (Schedule.Mode coordinated or
// oldest-emulation-version) is played by the world: a process that never
// fails, that looks at the lock every RetryPeriod/4 and, as package
// coordinated's Coordinator (or the API server's controller) does,
//
//   - gives a vacant Lease (absent, released, or expired by its own
//     observation: a lease after it last saw the record change) to the
//     best live candidate, by writing that candidate's record into it; a
//     Lease deleted or re-created without a record while its holder's
//     lease runs is not vacant until that lease has run out;
//   - in a prioritized coordinated election, names as preferred holder of
//     a held Lease the best live candidate that the steal rule (by the
//     default revision the webhook says) lets take it from the holder, and
//     withdraws a preference that no longer holds or names a candidate
//     that has gone; the holder hands over itself.
//
// Live is what the world knows: a process that runs. The real coordinator
// learns it from LeaseCandidate heartbeats; the sim leaves those out.
type coordinator struct {
	next time.Time
	// What it last saw of the record, and when (its own observation).
	seen      string
	seenAt    time.Time
	seenLease time.Duration
	// deletions is how many deletions of the lock the world had logged at
	// that look: a deletion since is how the coordinator tells a
	// re-created object from a release.
	deletions int

	mu sync.Mutex
	// live are the live candidates as of the coordinator's last look.
	live []rosterEntry
}

type rosterEntry struct{ id, key, revision string }

// coordinated reports whether a coordinator decides the schedule's
// election.
func (s Schedule) coordinated() bool { return s.Mode == ModeCoordinated || s.Mode == ModeOldest }

// rank orders candidates as the coordinator of mode would pick them: by
// the steal rule's classes with the default revision def (local of the
// default, remote of the default, local of another, remote of another),
// then by name; by name alone where the mesh's rule does not apply.
func rank(entries []rosterEntry, mode string, perRevision bool, def string) {
	class := func(e rosterEntry) int {
		if mode != ModeCoordinated || perRevision {
			return 0
		}
		c := 0
		if strings.HasPrefix(e.key, "^") {
			c++
		}
		if e.revision != def {
			c += 2
		}
		return c
	}
	sort.SliceStable(entries, func(i, k int) bool {
		ci, ck := class(entries[i]), class(entries[k])
		if ci != ck {
			return ci < ck
		}
		return entries[i].id < entries[k].id
	})
}

// liveRoster returns the live candidates, ranked for def.
func (w *World) liveRoster(def string) []rosterEntry {
	w.coord.mu.Lock()
	out := append([]rosterEntry(nil), w.coord.live...)
	w.coord.mu.Unlock()
	rank(out, w.sched.Mode, w.sched.PerRevision, def)
	return out
}

// coordinate is one look of the coordinator at the lock.
func (w *World) coordinate() {
	if !w.sched.coordinated() {
		return
	}
	now := w.clock.Now()
	var live []rosterEntry
	for _, c := range w.cands {
		if c.alive() {
			live = append(live, rosterEntry{id: c.id, key: c.key(), revision: c.spec.Revision})
		}
	}
	w.coord.mu.Lock()
	w.coord.live = live
	w.coord.mu.Unlock()
	if now.Before(w.coord.next) {
		return
	}
	w.coord.next = now.Add(w.sched.Timing.RetryPeriod / maxStepDivisor)
	lease, _ := w.api.getLock(leases, w.sched.LockName).(*coordinationv1.Lease)
	ranked := w.liveRoster(w.truth)
	holder := ""
	if lease != nil && lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if holder == "" {
		released := lease != nil && w.coord.seen != "" && w.deletions() == w.coord.deletions
		if w.coord.seen != "" && !released && now.Before(w.coord.seenAt.Add(w.coord.seenLease)) {
			return // deleted or re-created while its holder's lease runs
		}
		w.coord.seen = ""
		w.assign(lease, ranked, now)
		return
	}
	rec := resourcelock.LeaseToRecord(lease)
	seen := fmt.Sprintf("%s|%v|%v|%d", rec.HolderIdentity, rec.RenewTime, rec.AcquireTime, rec.LeaderTransitions)
	if seen != w.coord.seen || w.deletions() != w.coord.deletions {
		w.coord.seen, w.coord.seenAt, w.coord.deletions = seen, now, w.deletions()
		w.coord.seenLease = time.Duration(rec.LeaseDurationSeconds) * time.Second
	}
	if !now.Before(w.coord.seenAt.Add(w.coord.seenLease)) {
		w.assign(lease, ranked, now)
		return
	}
	if w.sched.Mode != ModeCoordinated || w.sched.PerRevision {
		return
	}
	want := ""
	wantKey := ""
	for _, e := range ranked {
		if e.id != holder && outranks(e.revision, strings.HasPrefix(e.key, "^"), rec.HolderKey, w.truth) {
			want, wantKey = e.id, e.key
			break
		}
	}
	have := ""
	if lease.Spec.PreferredHolder != nil {
		have = *lease.Spec.PreferredHolder
	}
	if want == have {
		return
	}
	lease = lease.DeepCopy()
	if want == "" {
		lease.Spec.PreferredHolder = nil
		delete(lease.Annotations, lockmeta.LeasePreferredHolderKeyAnnotation)
	} else {
		lease.Spec.PreferredHolder = &want
		if lease.Annotations == nil {
			lease.Annotations = map[string]string{}
		}
		lease.Annotations[lockmeta.LeasePreferredHolderKeyAnnotation] = wantKey
	}
	w.j.logf("coordinator prefers %q for the lock held by %q", want, holder)
	if err := w.api.putLock(leases, lease, true); err != nil {
		w.j.logf("coordinator: %v", err)
	}
}

// assign gives a vacant lock (lease, nil when absent) to the best live
// candidate.
func (w *World) assign(lease *coordinationv1.Lease, ranked []rosterEntry, now time.Time) {
	if len(ranked) == 0 {
		return
	}
	best := ranked[0]
	transitions := 0
	update := lease != nil
	if lease == nil {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: w.sched.LockName, Namespace: w.sched.Namespace}}
	} else {
		lease = lease.DeepCopy()
		transitions = resourcelock.LeaseToRecord(lease).LeaderTransitions + 1
	}
	rec := resourcelock.Record{HolderIdentity: best.id, HolderKey: best.key,
		LeaseDurationSeconds: int(w.sched.Timing.LeaseDuration / time.Second), LeaderTransitions: transitions}
	resourcelock.ApplyRecordToLease(rec, lease)
	t := metav1.NewMicroTime(now)
	lease.Spec.AcquireTime, lease.Spec.RenewTime = &t, &t
	lease.Spec.PreferredHolder = nil
	delete(lease.Annotations, lockmeta.LeasePreferredHolderKeyAnnotation)
	w.j.logf("coordinator gives the vacant lock to %q", best.id)
	if err := w.api.putLock(leases, lease, update); err != nil {
		w.j.logf("coordinator: %v", err)
	}
}

// isLive tells whether the candidate named id runs, as of the
// coordinator's last look.
func (w *World) isLive(id string) bool {
	w.coord.mu.Lock()
	defer w.coord.mu.Unlock()
	for _, e := range w.coord.live {
		if e.id == id {
			return true
		}
	}
	return false
}

// deletions counts the deletions of the lock object so far.
func (w *World) deletions() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, r := range w.records {
		if r.Deleted {
			n++
		}
	}
	return n
}

// CoordinatorFailsOver replaces the coordinator by a new one, as when the
// process that held the coordinator's own election dies and another takes
// it over: the new coordinator keeps the roster but has seen no record
// yet, so a vacant lock is assigned at its first look.
func (w *World) CoordinatorFailsOver() {
	w.coord.next, w.coord.seen, w.coord.seenAt, w.coord.seenLease, w.coord.deletions = time.Time{}, "", time.Time{}, 0, 0
}
