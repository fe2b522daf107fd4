package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// member is a candidate running in the background with its own clientset
// and request counter.
type member struct {
	id      string
	cand    Candidate
	counter *Counter
	cancel  context.CancelFunc
	done    chan struct{}
}

// startMember builds spec's candidate on a fresh counted clientset from cfg
// and runs it until stopped.
func startMember(cfg *rest.Config, spec Spec) (*member, error) {
	return startTracedMember(cfg, spec, nil, "")
}

// startTracedMember is startMember whose requests, watch deliveries and
// elector log become steps of who in tl (unless tl is nil).
func startTracedMember(cfg *rest.Config, spec Spec, tl *Timeline, who string) (*member, error) {
	m := &member{id: spec.Identity, counter: NewCounter(), done: make(chan struct{})}
	if tl != nil {
		cfg = rest.CopyConfig(cfg)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return tl.transport(who, rt) })
		spec.Logger = tl.logger(who)
	}
	client, err := newClient(cfg, m.counter)
	if err != nil {
		return nil, err
	}
	spec.Client = client
	m.cand, err = NewCandidate(spec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		m.cand.Run(ctx)
		if tl != nil {
			tl.Add(who, "Run returned")
		}
	}()
	return m, nil
}

// stop cancels the member (a release or a crash, by its spec) and waits up
// to timeout for it to return.
func (m *member) stop(timeout time.Duration) error {
	m.cancel()
	select {
	case <-m.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s did not stop within %v", m.id, timeout)
	}
}

// group is the candidates of one election.
type group []*member

// leader returns the one member leading, nil if none or several do.
func (g group) leader() *member {
	var found *member
	for _, m := range g {
		if m.cand.Leading() {
			if found != nil {
				return nil
			}
			found = m
		}
	}
	return found
}

// settled reports whether exactly one member leads and every member has
// observed it.
func (g group) settled() bool {
	l := g.leader()
	if l == nil {
		return false
	}
	for _, m := range g {
		if m.cand.Leader() != l.id {
			return false
		}
	}
	return true
}

// stopAll stops every member still running; it returns the first error.
func (g group) stopAll(timeout time.Duration) error {
	for _, m := range g {
		m.cancel()
	}
	var first error
	for _, m := range g {
		if err := m.stop(timeout); err != nil && first == nil {
			first = err
		}
	}
	return first
}
