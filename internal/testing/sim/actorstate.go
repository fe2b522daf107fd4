package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/meshd-io/meshd/internal/election/session"
)

// errMode is how an actor's API calls fail while an error fault lasts.
type errMode int

const (
	errNone     errMode = iota
	errInternal         // every call fails at once with a 500
	errTimeout          // every call waits, then fails with a server timeout
)

// timeoutDelay is how long a call waits before it fails in errTimeout mode
// (or earlier, when its context ends).
const timeoutDelay = 700 * time.Millisecond

// errDead is what a crashed actor's API calls return.
var errDead = errors.New("sim: process crashed")

// actorState is the part of an actor that faults act on: how its API calls
// behave and how its watches lag. The world changes it between steps; the
// actor's goroutines read it on every call.
type actorState struct {
	name  string
	clock *simClock

	mu          sync.Mutex
	dead        bool
	resume      chan struct{} // non-nil while paused; closed on resume
	mode        errMode
	lag         time.Duration
	watchBroken bool
	conflicts   int // the next writes fail with a conflict, unexecuted
	lostReplies int // the next writes happen but answer with a timeout
	failures    int // the next writes fail with a 500, unexecuted
	calls       int
	// sessionDown fails every call on a session Lease, lockDown every call
	// on any other object (the lock), each with a 500: one half of the
	// actor's traffic fails while the other works.
	sessionDown bool
	lockDown    bool
	// cutOff is set while an error mode or a pause keeps the actor from
	// the API; cutOffUntil is when the latest such fault ended.
	cutOff      bool
	cutOffUntil time.Time
	// injected, if set, is called when a one-off fault (a conflict, a
	// failure, a lost reply) hits a call: that is when the fault happens.
	injected func()
	// lastInjected is when a one-off fault last hit.
	lastInjected time.Time
	// wall is how far the actor's wall clock is ahead of the world's
	// (see wallclock.go).
	wall time.Duration
	// writeFaults fail the next writes of a kind (see writefaults.go);
	// writeHits counts the writes they failed; onWriteFault, if set, is
	// told of each.
	writeFaults  map[string]writeFault
	writeHits    map[string]int
	onWriteFault func(kind string, lost bool)
	// coalesce drops superseded changes from the bursts of the actor's
	// watches; coalesced counts the changes it dropped.
	coalesce  bool
	coalesced int
}

func newActorState(name string, clk *simClock) *actorState {
	return &actorState{name: name, clock: clk}
}

func isWrite(verb string) bool { return verb == "create" || verb == "update" || verb == "delete" }

// before decides the fate of a call before it reaches the API: nil lets it
// through. A paused actor's call waits for the resume (or its context).
func (s *actorState) before(ctx context.Context, verb, resource string) error {
	for {
		s.mu.Lock()
		dead, resume := s.dead, s.resume
		s.mu.Unlock()
		if dead {
			return errDead
		}
		if resume == nil {
			break
		}
		select {
		case <-resume:
		case <-ctx.Done():
			return fmt.Errorf("sim: %s %s while paused: %w", verb, resource, ctx.Err())
		}
	}
	s.mu.Lock()
	s.calls++
	mode := s.mode
	broken := s.watchBroken && (verb == "watch" || verb == "list")
	conflict := isWrite(verb) && verb != "create" && s.conflicts > 0
	if conflict {
		s.conflicts--
	}
	failure := isWrite(verb) && s.failures > 0
	if failure {
		s.failures--
	}
	if conflict || failure {
		s.lastInjected = s.clock.Now()
	}
	s.mu.Unlock()
	if (conflict || failure) && s.injected != nil {
		s.injected()
	}
	gr := schema.GroupResource{Resource: resource}
	switch {
	case broken:
		return apierrors.NewServiceUnavailable("sim: watch connection broken")
	case mode == errInternal || failure:
		return apierrors.NewInternalError(errors.New("sim: injected server error"))
	case mode == errTimeout:
		select {
		case <-s.clock.After(timeoutDelay):
		case <-ctx.Done():
		}
		return apierrors.NewServerTimeout(gr, verb, 1)
	case conflict:
		return apierrors.NewConflict(gr, "lock", errors.New("sim: injected conflict"))
	}
	return nil
}

// isSessionLease reports whether the object name of resource is a session
// Lease.
func isSessionLease(resource, name string) bool {
	return resource == leases && strings.HasPrefix(name, session.LeasePrefix)
}

// objectDown fails a call on the object name while the fault that covers
// it (sessionDown or lockDown) lasts.
func (s *actorState) objectDown(verb, resource, name string) error {
	s.mu.Lock()
	down := s.lockDown
	if isSessionLease(resource, name) {
		down = s.sessionDown
	}
	s.mu.Unlock()
	if !down {
		return nil
	}
	return apierrors.NewInternalError(fmt.Errorf("sim: injected server error on %s %s %s", verb, resource, name))
}

// after may turn the answer of a write that happened into a timeout.
func (s *actorState) after(verb, resource string) error {
	if !isWrite(verb) {
		return nil
	}
	s.mu.Lock()
	lost := s.lostReplies > 0
	if lost {
		s.lostReplies--
		s.lastInjected = s.clock.Now()
	}
	s.mu.Unlock()
	if !lost {
		return nil
	}
	if s.injected != nil {
		s.injected()
	}
	return apierrors.NewServerTimeout(schema.GroupResource{Resource: resource}, verb, 1)
}

func (s *actorState) watchLag() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lag
}

// Fault switches, used by the world.

func (s *actorState) setMode(m errMode) {
	s.mu.Lock()
	s.mode = m
	s.mu.Unlock()
	s.setCutOff(m != errNone)
}

func (s *actorState) setCutOff(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cutOff && !v {
		s.cutOffUntil = s.clock.Now()
	}
	s.cutOff = v
}

// cutOffSince reports whether the actor was kept from the API at any time
// since t.
func (s *actorState) cutOffSince(t time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cutOff || s.cutOffUntil.After(t)
}

// setSessionDown switches failures of the actor's session Lease calls.
func (s *actorState) setSessionDown(v bool) { s.mu.Lock(); s.sessionDown = v; s.mu.Unlock() }

// setLockDown switches failures of the actor's lock calls. The actor is cut
// off from its lock meanwhile, as by API errors: a holder that renews its
// record cannot (see World.unavoidable).
func (s *actorState) setLockDown(v bool) {
	s.mu.Lock()
	s.lockDown = v
	s.mu.Unlock()
	s.setCutOff(v)
}

func (s *actorState) setLag(d time.Duration) { s.mu.Lock(); s.lag = d; s.mu.Unlock() }

func (s *actorState) setWatchBroken(v bool) { s.mu.Lock(); s.watchBroken = v; s.mu.Unlock() }

func (s *actorState) addConflicts(n int) { s.mu.Lock(); s.conflicts += n; s.mu.Unlock() }

func (s *actorState) addFailures(n int) { s.mu.Lock(); s.failures += n; s.mu.Unlock() }

func (s *actorState) addLostReplies(n int) { s.mu.Lock(); s.lostReplies += n; s.mu.Unlock() }

func (s *actorState) kill() { s.mu.Lock(); s.dead = true; s.mu.Unlock() }

func (s *actorState) injectedAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastInjected
}

func (s *actorState) isDead() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.dead }

func (s *actorState) pause() {
	s.mu.Lock()
	if s.resume == nil {
		s.resume = make(chan struct{})
	}
	s.mu.Unlock()
	s.setCutOff(true)
}

func (s *actorState) unpause() {
	s.mu.Lock()
	if s.resume != nil {
		close(s.resume)
		s.resume = nil
	}
	s.mu.Unlock()
	s.setCutOff(false)
}
