// Package preemption is the priority protocol as the elector core calls
// it: whether a candidate takes an unexpired lock from its holder now. The
// key comparison (the elector's Config.KeyComparison) says whether it
// outranks the holder; the steal damper (package damping) keeps
// candidates that disagree from taking the lock from each other in a
// cycle; a cooperative candidate asks the holder first (package handover).
//
// Guarantees: a candidate takes the lock by force only when its comparison
// lets it, the damper allows a steal now, the holder's term is older than
// a RetryPeriod, and, when it is cooperative, the handover protocol says
// the holder cannot or did not answer in time. While the damper suspends
// preemption after a steal cycle, a cooperative candidate still asks the
// holder: a holder hands over only when its own comparison agrees, and no
// cycle follows a move both sides agree on; what the suspension stops is
// taking the lock by force. So once every candidate sees the same default
// the lock moves on request, without waiting out the hold-off. Every change
// of the preemption state is logged, recorded as an event on the lock and
// reported to the metrics sink, and State reports it to any goroutine.
//
// What it assumes of the core: it calls MayTake, from the election loop
// only, for a record naming another holder whose lease is valid, in a
// racing election, with the answer of its key comparison; it reports each
// steal and each loss of the lock while its lease was valid to the damper
// itself, which it shares. The rule holds the damper, the handover role,
// the lock (for events), a logger and a metrics sink; never the core.
package preemption

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/meshd-io/meshd/internal/protocol/damping"
	"github.com/meshd-io/meshd/internal/protocol/handover"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Event reasons of the changes of the preemption state.
const (
	ReasonSuspended = "PreemptionSuspended"
	ReasonResumed   = "PreemptionResumed"
)

// Metrics is what the rule reports: the elector's metrics sink implements
// it.
type Metrics interface {
	// StealCycle counts a steal cycle detected by this candidate.
	StealCycle(name string)
	// SetPreemptionSuspended reports whether preemption is suspended.
	SetPreemptionSuspended(name string, suspended bool)
}

// Config configures the rule of one candidate.
type Config struct {
	// Name labels metrics; the elector's Config.Name.
	Name string
	// Lock records the events.
	Lock resourcelock.Interface
	// Damper is the elector's steal damper.
	Damper *damping.Damper
	// Handover is the elector's handover role, shared, not a copy (never
	// nil); a rule asks the holder first when it is on.
	Handover *handover.Role
	Metrics  Metrics
	Logger   *zap.Logger
}

// Rule is one candidate's side of the priority protocol.
type Rule struct {
	cfg Config
	// state is the preemption state last reported; nil until the first
	// change, so that the many candidates that never meet a cycle carry
	// only the pointer.
	state atomic.Pointer[damping.Preemption]
}

// New returns the rule for cfg.
func New(cfg Config) *Rule { return &Rule{cfg: cfg} }

// State reports whether this candidate currently preempts holders it
// outranks, or has suspended preemption after a steal cycle. It may be
// called from any goroutine.
func (r *Rule) State() damping.Preemption {
	if st := r.state.Load(); st != nil {
		return *st
	}
	return damping.Preemption{}
}

// MayTake decides whether this candidate takes the unexpired lock rec from
// its holder now (true); false when the comparison (outranks: the key
// comparison's answer for rec's holder key), the steal damper or the
// handover protocol say no. termSince is when this candidate saw the
// holder's term begin (zero: it was on before it first looked); err is the
// handover protocol's.
func (r *Rule) MayTake(ctx context.Context, rec *resourcelock.Record, now, termSince time.Time, outranks bool) (bool, error) {
	d := r.cfg.Damper
	if !outranks {
		if d.Agree() {
			r.report(false, "candidates agree again; preemption resumes")
		}
		return false, nil
	}
	verdict := d.Check(now, rec.HolderKey)
	switch verdict {
	case damping.Cycle:
		r.report(true, fmt.Sprintf("steal cycle with holder %s (key %q): this candidate outranks it and it outranked this candidate; "+
			"preemption suspended until %s", rec.HolderIdentity, rec.HolderKey, d.State().RetryAt.UTC().Format(time.RFC3339)))
		r.cfg.Metrics.StealCycle(r.cfg.Name)
	case damping.Later:
		return false, nil
	}
	if d.Young(now, termSince) {
		return false, nil
	}
	if !r.cfg.Handover.On() {
		return verdict == damping.Allowed, nil
	}
	force, err := r.cfg.Handover.Ask(ctx, rec, now)
	if err != nil {
		return false, err
	}
	return force && verdict == damping.Allowed, nil
}

// report records a change of this candidate's preemption state in the
// log, an event, a metric and State.
func (r *Rule) report(suspended bool, msg string) {
	st := r.cfg.Damper.State()
	r.state.Store(&st)
	r.cfg.Metrics.SetPreemptionSuspended(r.cfg.Name, suspended)
	if suspended {
		r.cfg.Logger.Warn(msg)
		r.cfg.Lock.RecordEvent(corev1.EventTypeWarning, ReasonSuspended, msg)
		return
	}
	r.cfg.Logger.Info(msg)
	r.cfg.Lock.RecordEvent(corev1.EventTypeNormal, ReasonResumed, msg)
}
