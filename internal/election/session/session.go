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

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockwatch"
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
	// Sessions holds the running sessions that members of the same
	// client, namespace, identity and lease duration join. Required: the
	// program creates one (NewSessions) and passes it to every election
	// that should share a session.
	Sessions *Sessions
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
	if c.Sessions == nil || c.Sessions.live == nil {
		add("Sessions must be set (see NewSessions)")
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

// key identifies one live session of a Sessions: one Lease. Members of
// one key share the timing of the first (package election derives it all
// from the lease duration, which the Lease name holds).
type key struct {
	client    any
	namespace string
	lease     string
}

func (c Config) key() key {
	return key{c.Client, c.Namespace, LeaseName(c.Identity, c.LeaseDuration)}
}

// live is a running session: its heartbeat and its view of the namespace's
// sessions, shared by every Member started with the same key.
type live struct {
	hb      *heartbeat
	view    *view
	members int // guarded by Sessions.mu
	stop    func()

	mu    sync.Mutex
	wakes map[*Member]func()
}

// wakeAll calls the wake function of every member (see Member.SetWake).
func (l *live) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.wakes {
		f()
	}
}

func (l *live) setWake(m *Member, f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f == nil {
		delete(l.wakes, m)
		return
	}
	l.wakes[m] = f
}

// Sessions is the set of running sessions of a program: the members of
// one Sessions that name the same client, namespace, identity and lease
// duration share one heartbeat Lease, started by the first to start and
// ended by the last to stop. Members of two Sessions never share one, so
// the program (or a test building independent worlds in one process)
// decides what is shared by which Sessions it passes in; package
// election's Group keeps one for its elections.
//
// Each session follows the namespace's Leases through hub, which must be
// the hub of the elections' lock watches: a holder credits a heartbeat
// only once it came back through the watch that also delivers its lock.
//
// A Sessions runs goroutines only while one of its members runs. It is
// safe for concurrent use. The zero value is not usable: call NewSessions.
type Sessions struct {
	hub *lockwatch.WatchHub

	mu   sync.Mutex
	live map[key]*live
}

// NewSessions returns an empty set of sessions whose views of the
// namespace's Leases ride on hub; nil hub means a hub of its own (then the
// elections its members serve must watch through that same hub: prefer
// passing the elections' hub).
func NewSessions(hub *lockwatch.WatchHub) *Sessions {
	if hub == nil {
		hub = lockwatch.NewWatchHub()
	}
	return &Sessions{hub: hub, live: map[key]*live{}}
}

// Running is the number of sessions running now.
func (s *Sessions) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}

// Member is one election's share of its process's session. Build it with
// NewMember; it does nothing until Start. Its methods are safe for
// concurrent use.
type Member struct {
	cfg Config

	mu   sync.Mutex
	cur  *live
	wake func()
	// judged is the judgement EchoedSince was last asked about: its
	// number, the session it was made in, and the place of that session's
	// latest send when it was first asked (see EchoedSince).
	judged judgement
}

// judgement is a follower's judgement that a holder's session is over.
type judgement struct {
	id   uint64
	in   *live
	mark uint64
}

// SetWake sets a function called (it must not block) whenever a session in
// the member's namespace ends gracefully while the member runs, so that a
// follower of one of its holders tries at once. Call it before Start.
func (m *Member) SetWake(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.wake = f
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

// LeaseName is the name of the member's session Lease. While the member
// runs it is the one its session computed once, so that frequent callers
// (Status, health checks) hash nothing.
func (m *Member) LeaseName() string {
	if l := m.current(); l != nil {
		return l.hb.name
	}
	return LeaseName(m.cfg.Identity, m.cfg.LeaseDuration)
}

// Start joins the session of its Config's Sessions, starting it when this
// is its first member, until the returned function is called. That function returns once
// the member has left; the last member to leave ends the session (see
// heartbeat.end) and waits for its goroutines. Call it only after the work
// the member's election gates has stopped.
func (m *Member) Start() (stop func()) {
	k := m.cfg.key()
	reg := m.cfg.Sessions
	reg.mu.Lock()
	l := reg.live[k]
	if l == nil {
		l = startLive(m.cfg, reg.hub)
		reg.live[k] = l
	}
	l.members++
	reg.mu.Unlock()
	m.mu.Lock()
	m.cur = l
	wake := m.wake
	m.mu.Unlock()
	if wake != nil {
		l.setWake(m, wake)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			m.cur = nil
			m.mu.Unlock()
			l.setWake(m, nil)
			reg.mu.Lock()
			l.members--
			last := l.members == 0
			if last {
				delete(reg.live, k)
			}
			reg.mu.Unlock()
			if last {
				l.stop()
			}
		})
	}
}

// startLive starts a session's heartbeat and its view, which follows the
// namespace's Leases through hub.
func startLive(cfg Config, hub *lockwatch.WatchHub) *live {
	log := cfg.Logger.With(zap.String("namespace", cfg.Namespace))
	hb := newHeartbeat(cfg, log)
	l := &live{hb: hb, view: newView(cfg.Clock, hb.name, hb.token), wakes: map[*Member]func(){}}
	l.view.sentAt, l.view.seqNow = hb.sentAt, hb.seqNow
	l.view.onEnd = l.wakeAll
	unsubscribe := func() {}
	// The view rides on the hub's shared watch of Leases in the
	// namespace, the one the Lease locks there use too.
	if probe, err := resourcelock.New(resourcelock.LeasesResourceLock, cfg.Namespace, l.hb.name, cfg.Client,
		resourcelock.Config{Identity: cfg.Identity}); err == nil {
		unsubscribe = hub.SubscribeAll(probe.(lockcap.Watchable), lockwatch.Subscriber{
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

// Renewed is when the session's latest heartbeat that came back through
// the session's watch of Leases was sent, and whether the session is
// current: that heartbeat is younger than RenewDeadline − RetryPeriod/4, so
// that a heartbeat late to come back (a busy API server or process) does
// not make the holders write their records, while a holder whose session
// stopped still has a quarter of a retry period to write its record before
// its renew deadline. A heartbeat
// counts only once echoed, so that a holder whose watch stalls stops
// leaving its renewals to the session and writes its record, which shows it
// whether its lock was taken. Zero and false when the member is not
// started.
func (m *Member) Renewed() (sent time.Time, current bool) {
	l := m.current()
	if l == nil {
		return time.Time{}, false
	}
	sent = l.view.echoed()
	return sent, !sent.IsZero() && m.cfg.Clock.Since(sent) < m.cfg.RenewDeadline-m.cfg.RetryPeriod/4
}

// EchoedSince reports whether a heartbeat of this session sent after the
// judgement numbered judgement has come back through the session's watch
// of Leases. If not, it asks for a heartbeat now (one for any number of
// calls until it is sent) and calls notify once the next heartbeat comes
// back: once for all the member's calls since the last echo, the notify
// of the first of them (an election asks at every look, always with its
// wake-up; called once per look, the calls after the first would race its
// loop). notify must not block. A follower uses it before taking a lock
// whose holder's session it judged over, and asks at once when it judges,
// with a new number for each judgement: every heartbeat of that holder
// committed before the echo has then been seen, and any later one was
// sent past the holder's renew deadline.
//
// "After the judgement" is in the order of events, not of clock readings:
// a heartbeat counts when it was sent after the first call for the
// judgement, whatever the clock read (the heartbeat that call asks for
// counts, though a coarse or a fake clock may still read the same). One
// sent before it does not: it may come back in the very list the
// judgement was made from. A watch delivers in the order of the writes,
// but a list (after a broken watch) delivers in the order of the names,
// so the holder's Lease may follow this session's in it: the echo then
// proves nothing about the holder. Only a heartbeat sent after the
// judgement is certain to come back after that list; and when the watch
// broke unnoticed after the judgement, only one sent after the list that
// followed the break too, which the view ensures: it counts no heartbeat
// sent before its watch last came back as an echo. A member keeps one
// judgement: a call with another number starts anew.
func (m *Member) EchoedSince(judgement uint64, notify func()) bool {
	l := m.current()
	if l == nil {
		return false
	}
	mark := m.markOf(judgement, l)
	if l.view.echoedPast(mark, m, notify) {
		return true
	}
	if l.hb.seqNow() <= mark {
		l.hb.sendNow()
	}
	return false
}

// markOf is the place of session l's latest send when EchoedSince was
// first asked about judgement id.
func (m *Member) markOf(id uint64, l *live) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.judged.in != l || m.judged.id != id {
		m.judged = judgement{id: id, in: l, mark: l.hb.seqNow()}
	}
	return m.judged.mark
}

// AwaitStart waits until the session's first heartbeat has come back
// through the session's watch, ctx ends or timeout passes, and reports
// whether it came back. An election that waits for it before contending
// names its session in its very first record, instead of writing that
// record a second time once the session works.
func (m *Member) AwaitStart(ctx context.Context, timeout time.Duration) bool {
	l := m.current()
	if l == nil {
		return false
	}
	came := make(chan struct{}, 1)
	notify := func() {
		select {
		case came <- struct{}{}:
		default:
		}
	}
	t := m.cfg.Clock.NewTimer(timeout)
	defer t.Stop()
	for !l.view.echoedSince(l.hb.start, notify) {
		select {
		case <-came:
		case <-ctx.Done():
			return false
		case <-t.C():
			return false
		}
	}
	return true
}

// AliveUntil is until when the session ref is alive by this process's
// observation; zero when it is not (unknown here, or ended). known is false
// while the process cannot tell, including before Start.
func (m *Member) AliveUntil(ref string) (until time.Time, known bool) {
	if l := m.current(); l != nil {
		return l.view.aliveUntil(ref)
	}
	return time.Time{}, false
}
