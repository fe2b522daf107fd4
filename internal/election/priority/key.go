package priority

import "strings"

// RemotePrefix marks the holder key of an instance that serves a remote
// cluster: its key is RemotePrefix + revision.
const RemotePrefix = "^"

// DefaultRevision is the revision of an instance configured with none.
const DefaultRevision = "default"

// Candidate is what the steal rule knows about one instance.
type Candidate struct {
	// Revision of the instance; "" is read as DefaultRevision.
	Revision string
	// Remote is true for an instance running on behalf of a remote cluster.
	Remote bool
}

// Key is the holder key the candidate writes: the revision, with
// RemotePrefix for a remote instance.
func (c Candidate) Key() string {
	rev := c.Revision
	if rev == "" {
		rev = DefaultRevision
	}
	if c.Remote {
		return RemotePrefix + rev
	}
	return rev
}

// ParseKey reads a holder key. A key without the remote prefix is a local
// instance's revision. The revision is returned as written: an empty key
// (a holder that writes no key, such as client-go's elector) has revision "".
func ParseKey(key string) Candidate {
	if rev, ok := strings.CutPrefix(key, RemotePrefix); ok {
		return Candidate{Revision: rev, Remote: true}
	}
	return Candidate{Revision: key}
}
