package election

import "github.com/meshd-io/meshd/internal/election/priority"

// RemotePrefix marks the holder key of an instance that serves a remote
// cluster: its key is RemotePrefix + revision.
const RemotePrefix = priority.RemotePrefix

// DefaultRevision is the revision of an instance configured with none.
const DefaultRevision = priority.DefaultRevision

// Candidate is what the steal rule knows about one instance: its revision
// ("" is read as DefaultRevision) and whether it serves a remote cluster.
// Its Key method returns the holder key it writes: the revision, with
// RemotePrefix for a remote instance.
type Candidate = priority.Candidate

// ParseKey reads a holder key. A key without RemotePrefix is a local
// instance's revision. The revision is returned as written: an empty key (a
// holder that writes no key, such as client-go's elector) has revision "".
func ParseKey(key string) Candidate { return priority.ParseKey(key) }

// LocationPrioritizedComparison is the steal rule. It reports whether
// candidate may take a lock that is held, unexpired, by the holder whose key
// is holderKey, when defaultRevision is the mesh's default revision ("" when
// unknown):
//
//  1. take it if the revisions differ and the candidate's revision is the
//     known default;
//  2. otherwise take it if the revisions are equal, the candidate is local
//     and the holder remote;
//  3. otherwise do not.
//
// The rule has no cycles: rule 1 only ever moves the lock towards the
// default revision, and rule 2 only from remote to local within one
// revision. An empty or expired lock is taken by anyone without consulting
// the rule.
func LocationPrioritizedComparison(holderKey string, candidate Candidate, defaultRevision string) bool {
	return priority.LocationPrioritizedComparison(holderKey, candidate, defaultRevision)
}
