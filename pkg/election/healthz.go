package election

import (
	"fmt"
	"net/http"
	"time"

	"github.com/meshd-io/meshd/internal/errlist"
)

// checkable is what a HealthzAdaptor checks: a *LeaderElection, or a
// stand-in in this package's tests.
type checkable interface {
	// electionID names the election in the health check's answer.
	electionID() string
	// Check returns an error while this process leads but has not renewed
	// its lock for longer than the lease plus tolerance.
	Check(tolerance time.Duration) error
}

// HealthzAdaptor is a liveness check over the elections of a process, as
// client-go's leaderelection.HealthzAdaptor is for one elector: it fails
// while any of them leads without renewing for longer than its lease plus
// the tolerance, a process stuck while others may already lead; restarting
// it frees its locks. Followers and disabled elections are healthy.
//
// It serves HTTP itself (200 "ok", or 503 naming each stuck election), and
// the method value Check is a func(*http.Request) error, the shape of
// controller-runtime's healthz.Checker, for mgr.AddHealthzCheck. It checks
// the elections it was built with and is safe for concurrent use.
type HealthzAdaptor struct {
	tolerance time.Duration
	elections []checkable // fixed when built
}

// NewHealthzAdaptor returns a check of elections with the given tolerance
// beyond each lease (client-go suggests a few seconds; meshd uses half the
// lease). A negative tolerance is taken as 0; nil entries are ignored.
func NewHealthzAdaptor(tolerance time.Duration, elections ...*LeaderElection) *HealthzAdaptor {
	checks := make([]checkable, 0, len(elections))
	for _, e := range elections {
		if e != nil {
			checks = append(checks, e)
		}
	}
	return newHealthzAdaptor(tolerance, checks...)
}

// newHealthzAdaptor is NewHealthzAdaptor over any checkable.
func newHealthzAdaptor(tolerance time.Duration, elections ...checkable) *HealthzAdaptor {
	return &HealthzAdaptor{tolerance: max(tolerance, 0), elections: elections}
}

// Check returns nil while every election is healthy, else an error naming
// each one that is not. The request is not used.
func (h *HealthzAdaptor) Check(_ *http.Request) error {
	var errs []error
	for _, e := range h.elections {
		if err := e.Check(h.tolerance); err != nil {
			errs = append(errs, fmt.Errorf("election %s: %w", e.electionID(), err))
		}
	}
	return errlist.Join(errs...)
}

// ServeHTTP answers 200 "ok" while healthy, else 503 with the reasons.
func (h *HealthzAdaptor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err := h.Check(r); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err)
		return
	}
	fmt.Fprintln(w, "ok")
}
