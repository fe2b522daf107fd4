// Package election is meshd's mesh-level leader election: the API that
// control-plane daemons embed.
//
// A LeaderElection is one candidacy in one election, named by an election ID
// (the istiod IDs are exported as constants). Callers register work with
// AddRunFunction and call Run; the work runs only while this instance leads,
// and stops before the lock is released.
//
// Three kinds of election exist:
//
//   - prioritized (NewLeaderElection, NewLeaderElectionMulticluster,
//     NewLeaseLeaderElection): one leader per mesh; an instance of the
//     default revision takes the lock from other revisions, and a local
//     instance from a remote one of its revision (LocationPrioritizedComparison);
//   - per revision (NewPerRevisionLeaderElection): one leader per revision, on
//     a Lease named <electionID>-<revision>, never stolen.
//
// With ENABLE_LEADER_ELECTION=false every run function starts at once and no
// lock is touched.
//
// The guarantees and limits of the underlying elector apply (see package
// elector): clock-skew tolerance is LeaseDuration − RenewDeadline and there is
// no fencing.
package election
