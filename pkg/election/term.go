package election

import (
	"context"
	"fmt"
	"time"
)

// Term is one holder's tenure of one lock, as a run function sees it. Every
// change of holder increments the lock record's leaderTransitions, so among
// the terms of one lock object a higher Transitions is a later term: that
// number is the fencing token. Package fence makes writes to other objects
// conditional on it.
//
// Limits: the count lives in the lock object. Deleting that object (or a
// holder that resets the count, which neither meshd, istiod nor client-go
// does) starts again from zero, and tokens taken before then compare as
// newer.
type Term struct {
	// Lock is the lock object, as namespace/name.
	Lock string
	// Identity is the holder identity of this term.
	Identity string
	// Transitions is the record's leaderTransitions in this term.
	Transitions int
	// AcquireTime is when this holder acquired the lock, as the record says
	// (whole seconds on a ConfigMap lock).
	AcquireTime time.Time
	// Elected is false when leader election is disabled: nothing was
	// elected, Transitions means nothing, and fenced writes are not
	// checked.
	Elected bool
}

// String describes t, for logs and errors.
func (t Term) String() string {
	if !t.Elected {
		return fmt.Sprintf("%s (%s, leader election disabled)", t.Lock, t.Identity)
	}
	return fmt.Sprintf("%s term %d (%s)", t.Lock, t.Transitions, t.Identity)
}

type termKey struct{}

// TermFrom returns the term of the run function whose context is ctx (or a
// context derived from it); false when ctx does not come from an election.
func TermFrom(ctx context.Context) (Term, bool) {
	t, ok := ctx.Value(termKey{}).(Term)
	return t, ok
}

// WithTerm returns a context carrying t, for tests of code that reads
// TermFrom.
func WithTerm(ctx context.Context, t Term) context.Context {
	return context.WithValue(ctx, termKey{}, t)
}
