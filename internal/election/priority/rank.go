package priority

// Compare ranks two instances for leadership when defaultRevision is the
// mesh's default revision ("" when unknown). It returns a negative number
// when a should lead rather than b, a positive one when b should, and 0
// when the rule has no preference between them: an instance of the default
// revision ranks first, then, within a revision, a local instance before a
// remote one.
//
// Compare agrees with the steal rule: whenever
// LocationPrioritizedComparison lets a take the lock from b, Compare ranks
// a first. It also ranks a local instance before a remote one of another
// non-default revision, where the steal rule lets neither take the lock
// from the other; a coordinator that only moves a held lock when the steal
// rule allows it therefore never disagrees with a racing candidate.
func Compare(a, b Candidate, defaultRevision string) int {
	aDefault := defaultRevision != "" && a.revision() == defaultRevision
	bDefault := defaultRevision != "" && b.revision() == defaultRevision
	switch {
	case aDefault && !bDefault:
		return -1
	case bDefault && !aDefault:
		return 1
	case !a.Remote && b.Remote:
		return -1
	case a.Remote && !b.Remote:
		return 1
	}
	return 0
}

// revision is c's revision, DefaultRevision when empty.
func (c Candidate) revision() string {
	if c.Revision == "" {
		return DefaultRevision
	}
	return c.Revision
}
