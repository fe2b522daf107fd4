package priority

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
// The rule has no cycles: rule 1 only ever moves the lock towards the default
// revision, and rule 2 only from remote to local within one revision, so no
// set of instances can take a lock from each other in turn. An empty or
// expired lock is taken by anyone without consulting the rule.
func LocationPrioritizedComparison(holderKey string, candidate Candidate, defaultRevision string) bool {
	holder := ParseKey(holderKey)
	mine := candidate.Revision
	if mine == "" {
		mine = DefaultRevision
	}
	if mine != holder.Revision {
		return defaultRevision != "" && defaultRevision == mine
	}
	return !candidate.Remote && holder.Remote
}
