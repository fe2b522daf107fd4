// Package elector is a leader elector over a resourcelock.Interface, in the
// style of client-go's tools/leaderelection, with one addition: the record
// carries a holder key, and a KeyComparison hook lets a candidate take a lock
// that is held, unexpired, by a holder whose key it outranks.
//
// The package knows nothing about meshes, revisions or clusters: it sees a key
// and a comparison. The mesh policy lives in package election.
//
// # Timing
//
// A candidate that does not hold the lock tries to take it every RetryPeriod
// (jittered by JitterFactor), or at once when Trigger is called. A lock held
// by another identity counts as expired when
//
//	observedTime + record.leaseDurationSeconds < now
//
// where observedTime is the time this process last saw the record change,
// measured on its own clock. Clocks of different nodes therefore never need
// to agree; only their rates must, which is what the tolerance below covers.
//
// The leader renews every RetryPeriod with a single UPDATE of the object it
// last wrote (no GET first); only a failed update is followed by a GET. It
// stops leading when RenewDeadline has passed since it sent its last
// successful renew, and at once when it reads a record naming another holder.
// A record's leaseDurationSeconds is honoured up to MaxLeaseDuration.
//
// With Config.Watch the elector follows the lock object with a watch instead
// of polling it: followers make no requests while the holder renews, try at
// once when the lock is released, and wake exactly when the lease expires; a
// leader ends its term as soon as an event names another holder.
//
// Deleting the lock object is not a release: the holder may still be
// working. Followers keep waiting for its lease as they saw it (or create
// the lock at once if it was free or expired); the holder keeps leading and
// recreates the lock at its next renew.
//
// With Config.HandoverGrace a candidate entitled by KeyComparison asks a
// cooperating holder to hand over (see resourcelock.HandoverAnnotationKey);
// the holder stops its work before writing the record that names the
// candidate, so the two never lead at once. docs/handover.md describes the
// protocol and its races.
//
// # Guarantees and limits
//
//   - Clock-skew tolerance is LeaseDuration − RenewDeadline: if a follower's
//     clock runs fast relative to the leader's by less than that over one
//     lease, the follower never considers a lease expired while its holder
//     still believes it leads. (The follower starts its lease when it sees a
//     renew, which is after the leader sent it; the leader's deadline runs
//     from the sending.) With the ttl split of package election this allows
//     a follower clock up to twice as fast as the leader's.
//   - When leadership ends, the run callback's context is cancelled and the
//     elector waits up to StopTimeout for the callback to return before it
//     releases the lock, so a successor does not start while the old work is
//     still stopping (unless the callback overruns StopTimeout).
//   - There is no fencing: a leader paused longer than the lease (a long GC
//     pause, a frozen VM) may act after another has taken over. Work that
//     must never overlap needs its own fencing token.
//   - A steal by force (KeyComparison returning true against a holder that
//     does not cooperate, or that did not answer within HandoverGrace) ends
//     the old holder's term only when it next renews or observes the record;
//     until then two processes may believe they lead. A cooperative handover
//     has no such window.
package elector
