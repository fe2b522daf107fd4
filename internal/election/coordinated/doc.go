// Package coordinated implements meshd's side of Kubernetes coordinated
// leader election (coordination.k8s.io/v1beta1 LeaseCandidate) with a
// strategy of its own, Strategy, that ranks candidates by the mesh's
// priority rule (package priority).
//
// Three parts, each usable alone:
//
//   - Publisher announces one candidate of one election: it creates a
//     LeaseCandidate named by CandidateName, renews it as a heartbeat,
//     answers a coordinator's ping at once and deletes it on a graceful stop.
//   - Roster is a shared, reference-counted cache of the LeaseCandidates of
//     one namespace; it lists and ranks the candidates of an election.
//   - Coordinator decides who holds the Leases whose candidates announce
//     Strategy: it writes the holder of a vacant Lease and names a better
//     candidate in spec.preferredHolder of a held one. Holders are expected
//     to follow that decision (write the Lease to the preferred holder once
//     their work has stopped); this package never takes a Lease from a
//     valid holder.
//
// In coordinated mode the identity written into a Lease's holderIdentity is
// the candidate's name (CandidateName), as Kubernetes' own controller does
// for its OldestEmulationVersion strategy; the candidate's meshd identity
// and holder key travel as annotations (IdentityAnnotation,
// HolderKeyAnnotation).
//
// Liveness. A Publisher renews spec.renewTime every heartbeat (default twice
// the election's lease) and announces both in annotations. A candidate is
// live while renewTime + LivenessFactor x heartbeat has not passed: with the
// defaults, four leases after its last renewal, so a killed instance leaves
// the ranking within that time (a graceful stop deletes the candidate at
// once). Liveness alone never makes a candidate the holder: before writing
// a decision the coordinator wants a renewal within the candidate's lease
// duration, and pings (sets spec.pingTime) every candidate without one,
// waiting up to AckTimeout for renewTime >= pingTime; a Publisher answers a
// ping at once. Times on candidates come from the nodes' clocks; the
// windows tolerate offsets below one heartbeat, and an answer to a ping is
// never earlier than the ping itself.
//
// The API server must serve coordination.k8s.io/v1beta1 (kube-apiserver
// flags --feature-gates=CoordinatedLeaderElection=true and
// --runtime-config=coordination.k8s.io/v1beta1=true); Supported tells.
// Without it a Roster's cache never syncs and a Publisher keeps failing.
//
// Kubernetes' in-tree controller, when enabled, also looks at these leases:
// it pings candidates (sets pingTime) while a Lease is missing, expired or
// without holder, creates a missing Lease without holder and sets
// spec.strategy, and otherwise leaves leases of a third-party strategy
// alone. Both writers agree on spec.strategy, so they do not fight.
package coordinated

import (
	coordinationv1 "k8s.io/api/coordination/v1"
)

// Strategy is meshd's coordinated lease strategy: the best live candidate by
// the mesh's priority rule holds the Lease (see Roster.Ranked). The API
// server accepts it on a Lease and a LeaseCandidate because it is a
// qualified name with a prefix.
const Strategy coordinationv1.CoordinatedLeaseStrategy = "meshd.io/prioritized"

// Annotations on a LeaseCandidate written by a Publisher.
const (
	// IdentityAnnotation holds the candidate's meshd identity (for display;
	// the Lease names the candidate by its object name).
	IdentityAnnotation = "meshd.io/identity"
	// HolderKeyAnnotation holds the candidate's holder key: its revision,
	// or "^"+revision for a remote instance.
	HolderKeyAnnotation = "meshd.io/holder-key"
	// PreemptsAnnotation is "true" for a prioritized election, where a
	// better candidate is preferred over a valid holder, and "false" for a
	// per-revision election, where a valid holder is never moved.
	PreemptsAnnotation = "meshd.io/preempts"
	// LeaseDurationAnnotation holds the election's lease duration in whole
	// seconds; the coordinator writes it into the Lease it assigns.
	LeaseDurationAnnotation = "meshd.io/lease-duration-seconds"
	// HeartbeatAnnotation holds the candidate's renew interval in whole
	// seconds. Absent, the heartbeat is taken to be twice the lease
	// duration (the Publisher's default).
	HeartbeatAnnotation = "meshd.io/heartbeat-seconds"
)

// PreferredHolderKeyAnnotation on a Lease holds the holder key of the
// candidate named in spec.preferredHolder. The coordinator writes and
// removes it together with spec.preferredHolder.
const PreferredHolderKeyAnnotation = "meshd.io/preferred-holder-key"
