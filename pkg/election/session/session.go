package session

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/hashicorp/go-multierror"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Config describes a process's session in one namespace.
type Config struct {
	// Client writes the session Lease and watches the namespace's Leases.
	// Elections that share a session must share this client.
	Client kubernetes.Interface
	// Namespace holds the session Lease; the elections it serves keep
	// their locks in the same namespace.
	Namespace string
	// Identity is the process's holder identity.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are the session's
	// timing, with the elector's relations (package election derives them
	// from the ttl of the elections it serves).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Owner, if set, owns the session Lease (the process's Pod), so that
	// the Lease of a crashed process is garbage-collected with it.
	Owner *metav1.OwnerReference
	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
}

// ErrInvalidConfig is wrapped by every error of Validate.
var ErrInvalidConfig = errors.New("invalid session config")

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs *multierror.Error
	add := func(format string, args ...any) { errs = multierror.Append(errs, fmt.Errorf(format, args...)) }
	if c.Client == nil || reflect.ValueOf(c.Client).Kind() == reflect.Pointer && reflect.ValueOf(c.Client).IsNil() {
		add("Client must be set")
	} else if !reflect.TypeOf(c.Client).Comparable() {
		add("Client %T cannot be shared: it is not comparable", c.Client)
	}
	if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
		add("invalid namespace %q: %v", c.Namespace, msgs)
	}
	if c.Identity == "" {
		add("Identity must not be empty")
	}
	if c.LeaseDuration < time.Second {
		add("LeaseDuration %v must be at least 1s", c.LeaseDuration)
	}
	if c.RetryPeriod <= 0 || c.RenewDeadline <= c.RetryPeriod || c.LeaseDuration <= c.RenewDeadline {
		add("timing must satisfy LeaseDuration %v > RenewDeadline %v > RetryPeriod %v > 0", c.LeaseDuration, c.RenewDeadline, c.RetryPeriod)
	}
	if errs == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errs.ErrorOrNil())
}

// key identifies one live session of the process.
type key struct {
	client    any
	namespace string
	identity  string
	timing    [3]time.Duration
}

func (c Config) key() key {
	return key{c.Client, c.Namespace, c.Identity, [3]time.Duration{c.LeaseDuration, c.RenewDeadline, c.RetryPeriod}}
}

// live is a running session: its heartbeat and its view of the namespace's
// sessions, shared by every Member started with the same key.
type live struct {
	hb      *heartbeat
	view    *view
	members int // guarded by registry.mu
	stop    func()
}

var registry = struct {
	mu   sync.Mutex
	live map[key]*live
}{live: map[key]*live{}}

// Member is one election's share of its process's session. Build it with
// NewMember; it does nothing until Start. Its methods are safe for
// concurrent use.
type Member struct {
	cfg Config

	mu  sync.Mutex
	cur *live
}

// NewMember validates cfg and returns a member of the session cfg names.
func NewMember(cfg Config) (*Member, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Member{cfg: cfg}, nil
}

// LeaseName is the name of the member's session Lease.
func (m *Member) LeaseName() string { return LeaseName(m.cfg.Identity, m.cfg.LeaseDuration) }

// Start joins the process's session, starting it when this is its first
// member, until the returned function is called. That function returns once
// the member has left; the last member to leave ends the session (see
// heartbeat.end) and waits for its goroutines. Call it only after the work
// the member's election gates has stopped.
func (m *Member) Start() (stop func()) {
	k := m.cfg.key()
	registry.mu.Lock()
	l := registry.live[k]
	if l == nil {
		l = startLive(m.cfg)
		registry.live[k] = l
	}
	l.members++
	registry.mu.Unlock()
	m.mu.Lock()
	m.cur = l
	m.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			m.cur = nil
			m.mu.Unlock()
			registry.mu.Lock()
			l.members--
			last := l.members == 0
			if last {
				delete(registry.live, k)
			}
			registry.mu.Unlock()
			if last {
				l.stop()
			}
		})
	}
}

// startLive starts a session's heartbeat and view.
func startLive(cfg Config) *live {
	log := cfg.Logger.With(zap.String("namespace", cfg.Namespace))
	l := &live{hb: newHeartbeat(cfg, log), view: newView(cfg.Clock)}
	unsubscribe := func() {}
	// The view rides on the process's shared watch of Leases in the
	// namespace, the one Lease locks there use too.
	if probe, err := resourcelock.New(resourcelock.LeasesResourceLock, cfg.Namespace, l.hb.name, cfg.Client,
		resourcelock.Config{Identity: cfg.Identity}); err == nil {
		unsubscribe = resourcelock.SharedWatchHub().SubscribeAll(probe.(resourcelock.Watchable), resourcelock.Subscriber{
			OnObject: l.view.observe,
			OnHealth: l.view.setHealth,
		})
	} else {
		log.Error("cannot watch the namespace's sessions; session holders will be taken for alive", zap.Error(err))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { l.hb.run(ctx) })
	l.stop = func() {
		cancel()
		wg.Wait()
		unsubscribe()
		l.hb.end()
	}
	return l
}

func (m *Member) current() *live {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// Ref names the session in the records of its holders; "" before Start
// and after the member stopped.
func (m *Member) Ref() string {
	if l := m.current(); l != nil {
		return l.hb.ref()
	}
	return ""
}

// Renewed is when the session's last successful heartbeat was sent, and
// whether the session is current (see heartbeat.renewed); zero and false
// when the member is not started.
func (m *Member) Renewed() (sent time.Time, current bool) {
	if l := m.current(); l != nil {
		return l.hb.renewed(m.cfg.Clock.Now())
	}
	return time.Time{}, false
}

// AliveUntil is until when the session ref is alive by this process's
// observation; zero when it is not (unknown here, or ended). known is false
// while the process cannot tell, including before Start, and while the
// process's watch has not shown it its own session's heartbeat sent within
// LeaseDuration - RenewDeadline (see current): a watch that stalls
// without breaking (a partition that holds bytes) would otherwise let a
// live session look expired.
func (m *Member) AliveUntil(ref string) (until time.Time, known bool) {
	l := m.current()
	if l == nil {
		return time.Time{}, false
	}
	if !current(l.view, l.hb, m.cfg.Clock.Now(), m.cfg.LeaseDuration-m.cfg.RenewDeadline) {
		return time.Time{}, false
	}
	return l.view.aliveUntil(ref)
}

// current reports whether view v is current enough to judge other
// sessions at now: it has seen this process's own session (heartbeat h)
// renewed by a write that h sent no more than margin before now.
//
// Why that suffices, with margin = LeaseDuration - RenewDeadline: the watch
// delivers writes in the order they were stored, so having seen the own
// heartbeat sent at s means having seen every heartbeat of another session
// S stored before it, that is, stored before s. A heartbeat of S not seen
// yet was stored after s, so S learnt that it succeeded after s >= now -
// margin. S's holders credit a heartbeat only once it succeeded, and end
// their terms RenewDeadline after the last credited one; S counts as
// expired only once LeaseDuration has passed since its last heartbeat seen
// here, so its terms had ended (last seen + RenewDeadline < now - margin)
// before any later heartbeat could be credited: they cannot be resumed by
// it. Without this check a follower whose watch stalls without breaking
// (its traffic held, not refused) takes a session that lives for expired
// and writes over a lock object that the session's holder no longer
// rewrites, so the write's resourceVersion still matches. Both times are
// this process's own readings, the send time with its monotonic clock.
func current(v *view, h *heartbeat, now time.Time, margin time.Duration) bool {
	renew, ok := v.ownRenew(h.name, h.token)
	if !ok {
		return false
	}
	sent, ok := h.sentAt(renew)
	return ok && now.Sub(sent) <= margin
}
