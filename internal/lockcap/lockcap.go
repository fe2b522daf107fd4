// Package lockcap names what the locks of package resourcelock can do
// beyond resourcelock.Interface, for the protocols that use it: be followed
// by a watch, take part in a cooperative handover, carry a session mark or
// a holder's Pod mark, and carry a coordinator's preferred holder. The
// ConfigMap and Lease locks have every capability but the last, which only
// the Lease lock has; a multi lock can hand over and carry Pod marks, in its
// primary object.
package lockcap

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/lockwatch"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

var (
	_ HandoverLock              = (*resourcelock.ConfigMapLock)(nil)
	_ HandoverLock              = (*resourcelock.LeaseLock)(nil)
	_ Watchable                 = (*resourcelock.ConfigMapLock)(nil)
	_ Watchable                 = (*resourcelock.LeaseLock)(nil)
	_ lockwatch.SharedWatchable = (*resourcelock.ConfigMapLock)(nil)
	_ lockwatch.SharedWatchable = (*resourcelock.LeaseLock)(nil)
	_ SessionLock               = (*resourcelock.ConfigMapLock)(nil)
	_ SessionLock               = (*resourcelock.LeaseLock)(nil)
	_ HolderPodReader           = (*resourcelock.ConfigMapLock)(nil)
	_ HolderPodReader           = (*resourcelock.LeaseLock)(nil)
	_ CoordinatedLock           = (*resourcelock.LeaseLock)(nil)
)

// HandoverLock is implemented by locks that support cooperative handover.
type HandoverLock interface {
	resourcelock.Interface
	// Handover returns the handover annotation of the object version last
	// seen; the zero value when there is none or it cannot be decoded.
	Handover() lockmeta.Handover
	// RequestHandover writes h into the annotation of the object version last
	// seen, leaving the record alone. A concurrent write makes it fail with a
	// Conflict error.
	RequestHandover(ctx context.Context, h lockmeta.Handover) error
}

// Watchable is implemented by locks whose object can be followed by a watch.
type Watchable interface {
	resourcelock.Interface
	// ListWatch lists and watches only the lock object.
	ListWatch() cache.ListerWatcher
	// ExampleObject is an empty object of the lock's type.
	ExampleObject() runtime.Object
	// Observe takes an object delivered by the watch as the version last
	// seen, unless the lock already holds a newer one, and returns the record
	// of the version it now holds, as Get would. With deleted set, obj (which
	// may be a cache.DeletedFinalStateUnknown) was deleted: the lock forgets
	// its object and returns an empty record. An object other than the lock's
	// own yields lockwatch.ErrForeignObject and changes nothing.
	Observe(obj any, deleted bool) (*resourcelock.Record, []byte, error)
	// Peek returns the record of the version last seen without a request;
	// resourcelock.ErrNotInitialized when there is none.
	Peek() (*resourcelock.Record, []byte, error)
}

// SessionLock is a lock whose record writes can name the holder's session.
// The ConfigMap and Lease locks implement it.
type SessionLock interface {
	// SetSession turns session marks on: from now on every write of a
	// record naming this lock's identity carries mark's Session (which
	// may be empty: the holder renews its record itself) and Process, a
	// record naming another holder carries a mark with neither, and a
	// release removes the mark. mark.Mixed goes into every mark (see
	// lockmeta.SessionMark); mark.Holder is ignored, the record decides
	// it. A lock whose SetSession was never called leaves the annotation
	// as it finds it.
	SetSession(mark lockmeta.SessionMark)
	// SessionMark returns the mark of the object version last seen; false
	// when there is none or it cannot be decoded.
	SessionMark() (lockmeta.SessionMark, bool)
}

// HolderPodReader is a lock that reads the lockmeta.HolderPod mark of the
// object version it saw last. The ConfigMap and Lease locks and a multi lock
// (its primary's) implement it.
type HolderPodReader interface {
	// HolderPod returns the mark of the object version last seen; false
	// when there is none, it cannot be decoded or it is incomplete.
	HolderPod() (lockmeta.HolderPod, bool)
}

// CoordinatedLock is a lock whose object can carry a coordinator's
// decision (coordinated leader election): the candidate the holder should
// give the lock to.
type CoordinatedLock interface {
	resourcelock.Interface
	// PreferredHolder returns spec.preferredHolder of the object version
	// last read, written or watched, and the holder key written with it;
	// empty when there is none.
	PreferredHolder() (identity, key string)
}

// Replaced reports whether the object version that lock saw last belongs
// to another object than the version it saw before (deleted and created
// again in between: a new uid); false for a lock that cannot tell.
func Replaced(lock resourcelock.Interface) bool {
	r, ok := lock.(interface{ Replaced() bool })
	return ok && r.Replaced()
}

// ObjectUID is the uid of the object version lock saw last: objects of
// one name told apart across deletions. Empty when lock holds none or
// cannot tell.
func ObjectUID(lock resourcelock.Interface) string {
	u, ok := lock.(interface{ ObjectUID() string })
	if !ok {
		return ""
	}
	return u.ObjectUID()
}

// PodMarkPending reports whether lock's holder Pod mark (resourcelock
// Config.HolderPod) is not yet, or no longer, what the lock object shows:
// a holder's renew cannot then be left to a session.
func PodMarkPending(lock resourcelock.Interface) bool {
	p, ok := lock.(interface{ HolderPodPending() bool })
	return ok && p.HolderPodPending()
}

// RenewMark is the renew time a holder's write of its record stored (the
// wall clock, without a monotonic reading) and when the write was sent
// (the holder's clock, monotonic reading included), with when the first
// write was sent that stored the record as a follower comparing whole
// seconds reads it now (see DeadlineFrom). The zero value marks no write.
type RenewMark struct{ renew, at, seen time.Time }

// Wrote marks a write after m that stored renew, sent at at; changed
// tells whether it changed the record as resourcelock.EncodeRecord
// encodes it, with times in whole seconds.
func (m RenewMark) Wrote(renew, at time.Time, changed bool) RenewMark {
	if changed || m.seen.IsZero() {
		m.seen = at
	}
	return RenewMark{renew: renew.Round(0), at: at, seen: m.seen}
}

// Timing is the timing of an election that its holder's deadlines follow.
type Timing struct {
	LeaseDuration, RenewDeadline, RetryPeriod, StopTimeout time.Duration
}

// minSecondsDeadline is the shortest RenewDeadline that counts whole from
// the first renew of a second (see DeadlineFrom).
const minSecondsDeadline = 2 * time.Second

// DeadlineFrom is the time from which the RenewDeadline of the marked
// write's term counts: the holder stops working when it has renewed for
// none since, so that its work has stopped, within t.StopTimeout, before
// any follower may take the lock.
//
// A follower of client-go's shape (istiod) tells a renewal by a change of
// the record it encodes, whose times are whole seconds whatever the lock
// stores: a renew in the same second as the previous one looks like none,
// and such a follower times the lease from the first write of the second
// (seen). With a RenewDeadline of 2 s or more the deadline counts from
// seen: a renew a RetryPeriod later, in a later second, moves it in time.
// A shorter deadline counts from the write itself. Either way it ends no
// later than t.StopTimeout before the lease from seen runs out; the
// holder's renews, closer together as the deadline nears, move it by
// writing in a later second. Where that leaves too little room
// (LeaseDuration − StopTimeout under a second and a quarter RetryPeriod)
// the deadline is not held to it: followers comparing whole seconds may
// then time the lease from up to a second before the holder does. The
// holder never takes its deadline back: in session mode the session's
// heartbeat, which such followers cannot see, may have moved it further.
func (m RenewMark) DeadlineFrom(t Timing) time.Time {
	from := m.at
	if t.RenewDeadline >= minSecondsDeadline {
		from = m.seen
	}
	if t.LeaseDuration-t.StopTimeout < time.Second+t.RetryPeriod/4 {
		return from
	}
	if last := m.seen.Add(t.LeaseDuration - t.StopTimeout - t.RenewDeadline); last.Before(from) {
		return last
	}
	return from
}

// InheritRenew marks a term that began on a record another process wrote,
// with renew time prev, at now: the term's writes store renew times from
// the second after prev's on, rising with the monotonic clock from now.
//
// That process's wall clock may be ahead of this one's. Renew times read
// from this one's would fall below prev and, a few renewals later, repeat
// it: with times in whole seconds, the same bytes as the record the term
// began on. A follower that saw that record last, such as the process that
// wrote it and was paused since, would see no change, time the lease from
// that old sight and take the lock while this holder works.
//
// A renew time past the last second a record can store (the year 9999)
// is not inherited: renew times then follow this process's clock, which
// will not reach it.
func InheritRenew(prev, now time.Time) RenewMark {
	floor := prev.Round(0).Truncate(time.Second).Add(time.Second)
	if !storable(floor) {
		return RenewMark{}
	}
	return RenewMark{renew: floor, at: now}
}

// storable reports whether a record can store t: RFC 3339 in UTC writes
// the years 0000 to 9999 only.
func storable(t time.Time) bool { return t.UTC().Year() <= 9999 }

// Next is the renew time a renewal of the same term sent at now stores:
// now, or, when the wall clock stepped back since the marked write, that
// write's renew time plus the time passed since it by the monotonic clock.
//
// Followers of client-go's shape tell a renewal by a change of the
// record's bytes, with times in whole seconds: after a step back, renew
// times read from the wall clock would repeat ones written before, and a
// follower that saw such a record last would see no change, time the
// lease from that old sight and take the lock while the holder still
// works. With the monotonic clock's progress the renew times go on rising,
// ahead of the stepped wall clock by at most the step, for as long as the
// term lasts.
func (m RenewMark) Next(now time.Time) time.Time {
	if m.at.IsZero() {
		return now
	}
	// floor carries no monotonic reading, so After compares wall clocks.
	if floor := m.renew.Add(now.Sub(m.at)); floor.After(now) && storable(floor) {
		return floor
	}
	return now
}
