// Package election is meshd's mesh-level leader election: the API that
// control-plane daemons embed.
//
// A Spec declares one candidacy: the lock's namespace and election ID (the
// istiod IDs are exported as constants), this instance's identity, revision
// and location, the lock kind, and whether the election is prioritized or
// per revision. New validates it with the options and reports every problem
// at once. Register work with Add (or AddRunFunction, the stop-channel form
// of istiod) and call RunContext (or Run); the work runs only while this
// instance leads, and stops before the lock is released.
//
// Two kinds of election exist:
//
//   - prioritized: one leader per mesh; an instance of the default revision
//     takes the lock from other revisions, and a local instance from a
//     remote one of its revision (the steal rule, below);
//   - per revision (Spec.PerRevision): one leader per revision, on a Lease
//     named <electionID>-<revision>, never taken from its holder.
//
// The steal rule: each candidate writes its revision as its holder key,
// prefixed with "^" when it serves a remote cluster. A candidate takes a
// lock held, unexpired, by another when their revisions differ and its own
// is the known default revision, or when their revisions are equal, it is
// local and the holder remote; otherwise it waits. The rule has no cycles:
// the first case only moves the lock towards the default revision, the
// second only from remote to local. An empty or expired lock is taken by
// anyone.
//
// istiod's constructors (NewLeaderElection, NewLeaderElectionMulticluster,
// NewLeaseLeaderElection, NewPerRevisionLeaderElection) are thin adapters
// over New. A Group runs several elections with one default-revision
// watcher, one metrics registration and one event recorder.
//
// # What elections share
//
// Nothing is process-wide. What several elections share (the watch of the
// lock objects of a namespace and kind, the watch of the default revision,
// a session, a roster of coordinated candidates, the pacing of first
// attempts, the default identity) is a Shared, which the program creates
// and passes in, in the manner of etcd's concurrency.NewSession. A Group
// makes one for all its elections; a standalone election makes one of its
// own unless WithShared passes one in. Two elections built with different
// Shareds never affect each other.
//
// # Run functions and terms
//
// A RunFunc gets a context that carries its Term (TermFrom) and is cancelled
// when the term ends. The first error or panic of a run function ends the
// term for all of the election's run functions: the others are cancelled
// and awaited, the lock is released or handed over, the failure is recorded
// (Status, metrics), and the candidate contends again after a bounded
// back-off. Package fence makes writes to other objects conditional on the
// term.
//
// # Options apply to a protocol, or are refused
//
// The protocol of an election is what its Spec declares (prioritized or per
// revision, racing or one of the coordinated modes, the lock kind) and what
// WithEnabled and WithPrioritized turn off. Every option applies to some
// protocols only: WithHandover to racing,
// prioritized elections, the only ones that take a lock from its holder;
// WithDefaultWatcher and WithRevisionWebhook to elections that follow the
// default revision (and the latter only without the former);
// WithBinaryVersion to coordinated ones; WithCandidateOwner to coordinated
// ones and to sessions; WithDefaultLock to prioritized racing elections
// whose Spec names no lock; WithSessions to racing elections on a Lease;
// everything but the logger and WithShared to elections
// that are enabled. New refuses every option given for an election that
// does not apply to it, all at once and each by name, rather than ignore
// it: a setting that silently does nothing is a setting its author believes
// in and nobody checks.
//
// The Spec stays one declarative struct rather than becoming one
// constructor per protocol, on purpose: configuration (flags, environment,
// manifests) maps onto its fields one by one, istiod's four constructors
// fill it from their arguments unchanged, and the combinations a struct
// could express but no protocol has (a per-revision election on a
// ConfigMap, sessions with coordination, Remote per revision) are refused
// by New with the same kind of error as an option that does not apply.
//
// Options that configure a whole program rather than one election are
// defaults: those given to NewGroup, and those wrapped in Defaults (as
// features.ElectionOptions() returns them), apply to the elections they
// fit and are not refused by the others. Options given to New or
// Group.New for one election are checked strictly.
//
// # Configuration
//
// The package never reads the process environment: every default is fixed
// in code (DefaultTTL, ...). WithEnabled(false) starts every run function at
// once and touches no lock. A program that lets the environment decide, as
// meshd does, passes features.ElectionOptions() to New or NewGroup.
//
// The guarantees and limits of the underlying elector apply (see package
// elector): clock-skew tolerance is LeaseDuration − RenewDeadline, and the
// lock alone does not fence a holder paused past its lease.
package election
