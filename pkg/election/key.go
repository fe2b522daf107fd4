package election

import "github.com/meshd-io/meshd/internal/election/priority"

// RemotePrefix marks the holder key of an instance that serves a remote
// cluster: its key is RemotePrefix + revision.
const RemotePrefix = priority.RemotePrefix

// DefaultRevision is the revision of an instance configured with none.
const DefaultRevision = priority.DefaultRevision

// Candidate is what the steal rule knows about one instance: its revision
// and whether it serves a remote cluster.
type Candidate = priority.Candidate

// ParseKey reads a holder key; see priority.ParseKey.
func ParseKey(key string) Candidate { return priority.ParseKey(key) }

// LocationPrioritizedComparison is the steal rule: whether candidate may
// take a lock held, unexpired, under holderKey when defaultRevision is the
// default ("" when unknown). See priority.LocationPrioritizedComparison.
func LocationPrioritizedComparison(holderKey string, candidate Candidate, defaultRevision string) bool {
	return priority.LocationPrioritizedComparison(holderKey, candidate, defaultRevision)
}
