// Package session keeps one heartbeat per process for all the elections it
// holds, so that the cost of renewing grows with processes, not with
// elections.
//
// A session is a coordination.k8s.io/v1 Lease named after the process's
// identity and ttl (LeaseName), renewed every RetryPeriod by one
// optimistic UPDATE, as a kubelet renews its node Lease. Every Lease write
// carries a token drawn when the session starts, so a restarted process
// (same identity, same Lease) is never mistaken for the one before it. A
// holder that renews through its session names it in a mark next to its
// election record (lockmeta.SessionMark) and stops rewriting the
// record; followers judge it alive while its session is, by their own
// observation of the session Lease through the shared watch of Leases of
// the hub their Sessions was built with (lockwatch.WatchHub, the one
// their Lease locks use too): a session token counts as alive until
// LeaseDuration after this process last saw it renewed, exactly as a record
// does. Both sides lean on that watch delivering in order: a holder credits
// a heartbeat only once it came back through the watch (so it has seen
// every write that took one of its locks before it), and a follower takes a
// lock whose holder's session looks over only once a heartbeat of its own,
// sent after it judged so, came back (so it has seen every heartbeat of the
// holder that could still extend its term).
//
// # Guarantees and limits
//
//   - A holder credits its session's heartbeat to a term only while its
//     lock names that session, and ends the term RenewDeadline after the
//     last heartbeat or record write that succeeded, whichever is later:
//     losing the session stops all the work it gates within RenewDeadline.
//     The clock-skew tolerance is the elector's: LeaseDuration -
//     RenewDeadline.
//   - Deleting a session Lease is not its end: followers keep each token
//     alive until a lease after they last saw it renewed, and the session
//     creates its Lease again at its next heartbeat. Only the session's
//     own graceful end (a write that clears the holder, then a delete)
//     ends it at once.
//   - While the process's watch of Leases is broken (or has not listed),
//     a follower cannot tell whether a session lives: it treats every
//     session as alive and takes no lock held through one until the watch
//     is back. Safety is kept; failover waits for the watch.
//   - Readers that do not know sessions (istiod, older meshd, client-go)
//     see a record that is not renewed and take the lock after its lease.
//     Sessions are therefore only for elections whose candidates are all
//     session-aware meshd. A candidate that sees a holder without a
//     session-aware mark stops naming its session in that election for
//     the life of its process, and renews its record itself when it
//     leads; a follower that never held cannot be detected that way.
//   - All elections that share a session must share its client and its
//     Sessions (one per program, or per Group: nothing is process-wide);
//     two processes must not share an identity.
package session
