package election

import "k8s.io/client-go/kubernetes"

// The constructors below have the names and parameter order of istiod's
// leaderelection package, so that code written against it ports by changing
// the import (and handling the error, which istiod's versions do not
// return). Each is New with a Spec filled from its arguments; an empty
// identity means the Identity of the election's Shared and an empty
// revision DefaultRevision.

// NewLeaderElection builds a prioritized election on the lock istiod uses for
// electionID: a ConfigMap named electionID in namespace, unless
// WithDefaultLock names another kind. An instance of the default revision
// takes the lock from instances of other revisions.
func NewLeaderElection(namespace, identity, electionID, revision string, client kubernetes.Interface, opts ...Option) (*LeaderElection, error) {
	return NewLeaderElectionMulticluster(namespace, identity, electionID, revision, false, client, opts...)
}

// NewLeaderElectionMulticluster is NewLeaderElection for an instance that may
// serve a remote cluster: a remote instance writes the key "^"+revision, and
// a local instance of the same revision takes the lock from it.
func NewLeaderElectionMulticluster(namespace, identity, electionID, revision string, remote bool, client kubernetes.Interface, opts ...Option) (*LeaderElection, error) {
	return New(client, Spec{Namespace: namespace, ElectionID: electionID, Identity: identity, Revision: revision, Remote: remote}, opts...)
}

// NewLeaseLeaderElection builds a prioritized election on a Lease named
// electionID, with the holder key in the leader.istio.io/holder-key
// annotation.
func NewLeaseLeaderElection(namespace, identity, electionID, revision string, client kubernetes.Interface, opts ...Option) (*LeaderElection, error) {
	return New(client, Spec{Namespace: namespace, ElectionID: electionID, Identity: identity, Revision: revision, Lock: LeaseLock}, opts...)
}

// NewPerRevisionLeaderElection builds an election with one leader per
// revision, on a Lease named <electionID>-<revision> that is never taken
// from its holder.
func NewPerRevisionLeaderElection(namespace, identity, electionID, revision string, client kubernetes.Interface, opts ...Option) (*LeaderElection, error) {
	return New(client, Spec{Namespace: namespace, ElectionID: electionID, Identity: identity, Revision: revision, PerRevision: true}, opts...)
}
