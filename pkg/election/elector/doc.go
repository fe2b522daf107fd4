// Package elector is a leader elector over a resourcelock.Interface, in the
// style of client-go's tools/leaderelection, with one addition: the record
// carries a holder key, and a KeyComparison hook lets a candidate take a lock
// that is held, unexpired, by a holder whose key it outranks.
//
// The package knows nothing about meshes, revisions or clusters: it sees a key
// and a comparison. The mesh policy lives in package election.
//
// # Core and protocols
//
// The elector is a core that knows one record, one clock and one lock: it
// observes the record, acquires, renews, releases, lets a lease expire,
// starts and stops a term, and keeps the fence as a value. Every protocol
// beyond that is a value the program builds and passes in Config, which the
// core asks a question at a few points and which holds no reference back
// into the core: Handover (cooperative preemption), Sessions (renewal by a
// process's session), Coordination (a coordinator picks the holder),
// HolderExit (proof that a holder's process exited) and Pacer (pacing of
// first attempts), each an interface of package internal/protocol. Package
// election builds them from the packages under internal/protocol and
// internal/pacing; the steal damper is a value from
// internal/protocol/damping that the core owns. Each interface states what
// the core promises it: every method is called from the election loop,
// with the clock reading of the decision in progress, after the core has
// read or been delivered the lock object whose annotations the protocol
// reads; the record, the fence and the end of a term stay the core's.
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
// leader ends its term as soon as an event names another holder. The watch
// is shared by all the electors given the same hub (Config.Hub) on the same
// client, namespace and lock kind, and the first attempts of all electors
// given the same pacer (Config.Pacer) pass through one token bucket. Both
// are objects the program creates and passes in; an elector given no hub
// has its own, one given no pacer is not paced, and neither shares anything
// with any other.
//
// Only a change of the record itself (holder, key, lease, times,
// transitions) restarts the lease: a label, a foreign annotation or a
// handover request does not. Deleting the lock object, or replacing it by
// one without a record, is not a release: the holder may still be working.
// Followers keep waiting for its lease as they saw it (or create the lock at
// once if it was free or expired); the holder keeps leading and writes its
// record again as soon as its watch shows the change, or at its next renew.
// A candidate that never saw a record of the lock treats an object without
// one as held by an unknown holder for LeaseDuration from first sight (a
// missing object it creates at once).
// A record naming this candidate that follows such a deletion or
// re-creation, is found in an object with a new uid, or does not count one
// transition more than the holder's, is not that holder's handover (a
// coordinator that never saw the holder's record may have written it): the
// candidate holds the lock at once but starts OnStartedLeading only when
// that holder's lease, as it observed it, has run out.
//
// # Preemption
//
// A candidate takes an unexpired lock from a holder only when KeyComparison
// says it outranks the holder's key, and then at most once per RetryPeriod,
// never within a RetryPeriod after the lock was taken from it, and never
// from a term that it saw begin less than a RetryPeriod ago (so that a
// chain of candidates, each outranking the holder before it, moves the
// lock once per RetryPeriod, not all at once). Taking
// the lock back from the key that took it from this candidate is a steal
// cycle (the candidates disagree, for example about the default revision):
// preemption by force is suspended until a lease after the loss (a constant
// hold-off: a candidate that cannot ask cannot learn that the other side came
// to agree), and reported (log, event, metrics.Metrics' StealCycle and
// SetPreemptionSuspended, LeaderElector.Preemption) until the candidate's
// comparison no longer outranks the holder.
//
// With Config.Handover (the protocol of package internal/protocol/handover,
// behind protocol.Handover; docs/handover.md) a candidate first asks a
// cooperating holder to hand over. The holder answers: it accepts
// with the time within which its work will have stopped, or refuses. An
// accepted request is followed by the record naming the candidate once the
// holder's work stopped, and the candidate starts on that record without a
// write of its own, counting its renew deadline from when it sent its
// request (every other candidate saw the record, and timed its lease, after
// that); a refused one is never followed by force. Only a
// holder that does not cooperate (istiod, client-go) or does not answer
// within the grace (Handover.Grace) is preempted by force.
//
// After a forced steal the elector holds the lock at once but starts
// OnStartedLeading only at the old holder's last renew as observed here
// plus the lease it announced, when that holder's work must have stopped
// (a client-go-shaped holder stops at its renew deadline, which is shorter
// than its lease). Config.StartAtOnceAfterSteal gives up this fence for
// speed. The fence holds whatever happens before it: a steal whose write
// failed ambiguously (a timeout) sets it too, in case the write happened;
// it outlives a term that ends before it, for the next Run; and a holder
// asked for the lock before its fence gives it up only at the fence, with a
// brief lease, since the candidate that asked may have crashed meanwhile (a
// shutdown before the fence leaves the lock to expire rather than release
// it), unless the request honours fences: then the holder names the
// candidate at once, its answer and the record naming the candidate carry
// the time left to the fence, and the candidate's work waits it out. At the
// fence, a holder renews first, with a write, and starts only once a renew
// succeeded, so that it never starts beside a holder that took the lock
// while it waited. A watch that shows no such write proves nothing: it may
// hand it over late (it lags), or after a list older than it (it broke and
// came back).
//
// # Sessions
//
// With Config.Session a holder's record is kept alive by its process's
// session (package election/session: one heartbeat Lease per process,
// plugged in through package internal/protocol/sessions)
// instead of one write per RetryPeriod. The holder names its session in a
// mark next to the record (lockmeta.SessionMark) and, while the
// session is current, its watch has not broken since before its last
// write of its record and no request waits for an answer, makes no
// request at its renewals; each session heartbeat counts
// as a renew of the term once the lock's watch has delivered it back, so a
// holder credits no heartbeat sent after a write that took its lock
// without having seen that write. A candidate that takes such a lock by
// force therefore starts its work no earlier than LeaseDuration, and
// RenewDeadline + StopTimeout, after its write (and the holder's observed
// lease): the holder's term ends within RenewDeadline of that write, and
// its work has the rest of the lease, and StopTimeout at least, to stop. Otherwise it writes its record as usual, with a
// mark that names no session. A follower counts a lock as held while its
// record's lease or the holder's session is alive, each by its own
// observation; while it cannot tell whether the session lives (its watch
// of sessions is broken) it counts the session as alive. A session its
// watch shows over counts as over only once a heartbeat of the follower's
// own session, sent after it judged so, came back through that watch:
// since a watch delivers in order, a lagging watch cannot hide a
// heartbeat that still extends the holder's term. A candidate that
// sees a holder without a mark of its own (istiod, client-go, meshd
// without sessions) renews its record itself from then on, since such a
// candidate would take a record that is not rewritten.
//
// # Proof of a holder's exit
//
// With Config.HolderExit a follower asks a plug-in (package
// election/podexit: the kubelet's report of the holder's container) whether
// the observed holder's process has exited, whenever it judges whether that
// holder's lease still binds it; a true answer ends the lease at once. The
// follower then takes the lock through the usual write over the version it
// observed, which conflicts if the holder wrote meanwhile, and starts its
// work without a fence for the exited holder (a fence set earlier for
// another holder stays). The plug-in must answer false whenever in doubt:
// it is the one place where anything but this process's clock shortens a
// lease.
//
// # Ending a term
//
// A term ends when the Run context is cancelled, the lock is lost, a
// handover is accepted, or OnStartedLeading returns. The elector cancels the
// callback and keeps renewing until it has returned; only then does it hand
// the lock over or release it. A callback that outlives StopTimeout keeps
// the lock held, so that no successor starts beside it, is logged every
// lease, and makes Check fail, so that a liveness probe restarts the
// process; Run returns only when the callback has returned.
//
// The elector reports that a term began and ended; it does not supervise
// the work. What the callback returned, a panic in it, and whether and how
// long to wait before the next Run belong to the caller: package election
// recovers every run function, logs and counts a failure once, and backs
// off from RetryPeriod up, so that failing work moves the lock at most once
// per RetryPeriod.
//
// # The stack of a waiting candidate
//
// A candidate's goroutine spends almost all its life waiting: a follower in
// acquire, a leader in renew. The runtime halves a goroutine's stack at a
// garbage collection only while less than a quarter of it is in use,
// counting 800 bytes it keeps in reserve, so an 8 KiB stack goes back to
// 4 KiB only if the goroutine uses under 2 KiB. Two rules keep a waiting
// candidate there. The frames on the way to a wait are small: what runs
// once per term or per contention is in functions that have returned by
// the time the candidate waits (beginTerm, endTerm; in package election,
// begin and endContention). And what follows a wake-up (followerWoke,
// renewWoke: decisions on the record, API requests, logging) runs on a
// goroutine of its own (package internal/ownstack), whose stack goes back
// to the runtime when it returns, instead of growing the waiting
// goroutine's stack again at every renew and every watch event. The waits
// themselves stay on the candidate's goroutine, the first attempt's too
// (for a healthy watch, for a pacing turn): a Run that waited on a second
// goroutine would hold two while thousands of elections start together.
// One wake-up is the exception: a renew tick of a holder whose session renewed
// its term (renewedInPlace) needs no request and no decision, and runs in
// place, with no encoding/json on its way (the session mark is read by
// hand); a goroutine per tick would cost a start and a thread woken at
// every tick of every election a process leads. A waiting
// leader uses about 1.9 KiB, a follower 1.7, whether LeaderElection.Run or
// a Group runs them; with a thousand elections in a process the stacks
// are 4 MiB smaller. internal/testing/stackdepth measures it and fails
// when it no longer holds.
//
// # Timing relations
//
// New reports every violated relation at once:
//
//	LeaseDuration >= 1s, LeaseDuration > RenewDeadline > JitterFactor x RetryPeriod > 0
//	StopTimeout < LeaseDuration - RetryPeriod     (a holder's promised stop fits its lease)
//	Handover.Grace() > RetryPeriod                (a polling holder answers at its next renew)
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
//     elector renews the lock until the callback has returned; only then does
//     it release or hand over the lock, so a successor never starts while the
//     old work is still stopping, as long as this process keeps running.
//   - There is no fencing of the work itself: a leader paused longer than
//     the lease (a long GC pause, a frozen VM) may act after another has
//     taken over. Work that must never overlap needs its own fencing token.
//   - A steal by force ends the old holder's term only when it next renews
//     or observes the record; until then two processes may believe they
//     lead, but with the fenced start only the old one runs its work. The
//     fence assumes the old holder stops its work within its lease after its
//     last renew (true of client-go, istiod and meshd unless paused or hung).
//   - A follower of client-go's shape (istiod) compares records with their
//     times in whole seconds, whatever the lock stores (a ConfigMap stores
//     whole seconds, a Lease microseconds): a renew in the same second as
//     the previous one is invisible to it, and it times the lease from the
//     first renew of the second. With a RenewDeadline of 2s or more (ttl
//     4s and up) the holder's renew deadline counts from that renew too;
//     a shorter one counts from the latest renew. Either way the term ends
//     no later than StopTimeout before the lease from the first renew of
//     the second runs out, unless LeaseDuration − StopTimeout is under a
//     second and a quarter RetryPeriod: then no renew is sure to fall in a
//     later second in time, and such a follower may time the lease from up
//     to a second before the holder does (lockcap.RenewMark.DeadlineFrom,
//     docs/handover.md). A candidate that finds its own record after its
//     term ended starts a new term (leaderTransitions one up) rather than
//     writing the old one again, which with its wall clock stepped back
//     could leave the stored record unchanged.
//   - A term already on when a candidate first looks counts as old, so
//     that a candidate preempts at once when it starts: candidates that
//     start within one RetryPeriod, each outranking the holder before it,
//     may still move the lock once each.
package elector
