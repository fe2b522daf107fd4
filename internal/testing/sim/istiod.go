package sim

import (
	"bytes"
	"context"
	"math/rand"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// IstiodSpec describes a holder of client-go's shape, as istiod runs it: it
// reads and writes the record every RetryPeriod, knows nothing of handover
// requests, never steals, counts a lease from when the record bytes last
// changed, and stops its work only when it could not renew for
// RetryPeriod + RenewDeadline (client-go's renew loop).
type IstiodSpec struct {
	Name    string
	Key     string
	StartAt time.Duration
}

type istiod struct {
	w     *World
	spec  IstiodSpec
	state *actorState
	lock  resourcelock.Interface
	rnd   *rand.Rand

	mu       sync.Mutex
	isLeader bool
	ticket   int
	cancel   context.CancelFunc
	done     chan struct{}

	// Used only by the loop; times by the process's clock (actorClock).
	lastRenew    time.Time
	observedRaw  []byte
	observedTime time.Time
}

func (s *istiod) name() string { return s.spec.Name }

func (s *istiod) start() error {
	lock, err := resourcelock.New(s.w.sched.LockKind, s.w.sched.Namespace, s.w.sched.LockName,
		newActorClient(s.w.api, s.state), resourcelock.Config{Identity: s.spec.Name, Key: s.spec.Key})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.lock, s.cancel, s.done = lock, cancel, make(chan struct{})
	s.mu.Unlock()
	s.w.j.logf("%s (client-go shape) starts, key %q", s.spec.Name, s.spec.Key)
	go s.loop(ctx)
	return nil
}

// clock is the process's clock: its wall clock in what it writes, the
// world's for its durations.
func (s *istiod) clock() actorClock { return newActorClock(s.w.clock, s.state) }

func (s *istiod) loop(ctx context.Context) {
	defer close(s.done)
	t := s.w.sched.Timing
	for {
		// A leader's renew loop ends RetryPeriod + RenewDeadline after its
		// last renew, even with a request in flight.
		deadline := s.lastRenew.Add(t.RetryPeriod + t.RenewDeadline)
		wait := t.RetryPeriod
		if !s.leading() {
			wait += time.Duration(s.rnd.Float64() * 1.2 * float64(t.RetryPeriod))
		} else if left := deadline.Sub(s.clock().Now()); left < wait {
			wait = left
		}
		select {
		case <-ctx.Done():
			s.setLeading(false)
			return
		case <-s.w.clock.After(wait):
		}
		if s.leading() && !s.clock().Now().Before(deadline) {
			s.lost()
			continue
		}
		timeout := t.RetryPeriod
		if left := deadline.Sub(s.clock().Now()); s.leading() && left < timeout {
			timeout = left
		}
		callCtx, cancel := context.WithTimeout(ctx, timeout)
		ok := s.tryAcquireOrRenew(callCtx)
		cancel()
		now := s.clock().Now()
		switch {
		case ok:
			s.lastRenew = now
			s.setLeading(true)
		case s.leading() && !now.Before(deadline):
			s.lost()
		}
	}
}

func (s *istiod) lost() {
	s.w.j.logf("%s failed to renew in time; stops", s.spec.Name)
	s.setLeading(false)
}

// tryAcquireOrRenew is one GET and, when allowed, one write.
func (s *istiod) tryAcquireOrRenew(ctx context.Context) bool {
	now := s.clock().Now()
	mine := resourcelock.Record{
		HolderIdentity: s.spec.Name, HolderKey: s.spec.Key,
		LeaseDurationSeconds: int(s.w.sched.Timing.LeaseDuration / time.Second),
		AcquireTime:          metav1.NewTime(now), RenewTime: metav1.NewTime(now),
	}
	rec, raw, err := s.lock.Get(ctx)
	if apierrors.IsNotFound(err) {
		if err := s.lock.Create(ctx, mine); err != nil {
			return false
		}
		s.observedRaw, s.observedTime = resourcelock.EncodeRecord(mine), now
		return true
	}
	if err != nil {
		return false
	}
	if !bytes.Equal(raw, s.observedRaw) {
		s.observedRaw, s.observedTime = raw, now
	}
	lease := time.Duration(rec.LeaseDurationSeconds) * time.Second
	if rec.HolderIdentity != "" && rec.HolderIdentity != s.spec.Name && s.observedTime.Add(lease).After(now) {
		return false
	}
	if rec.HolderIdentity == s.spec.Name {
		mine.AcquireTime, mine.LeaderTransitions = rec.AcquireTime, rec.LeaderTransitions
	} else {
		mine.LeaderTransitions = rec.LeaderTransitions + 1
	}
	if err := s.lock.Update(ctx, mine); err != nil {
		return false
	}
	s.observedRaw, s.observedTime = resourcelock.EncodeRecord(mine), now
	return true
}

// setLeading starts or ends the work with leadership: client-go cancels
// the run context when it stops leading, and istiod's work follows it.
func (s *istiod) setLeading(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v == s.isLeader {
		return
	}
	s.isLeader = v
	if v {
		s.ticket = s.w.ledger.start(s.spec.Name)
	} else {
		s.w.ledger.end(s.ticket)
	}
}

func (s *istiod) leading() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.isLeader
}

func (s *istiod) alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil || s.state.isDead() {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

func (s *istiod) stop() {
	s.mu.Lock()
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (s *istiod) crash() {
	s.state.kill()
	s.stop()
}

func (s *istiod) stopped() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}
