package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/meshd-io/meshd/internal/election/coordinated"
	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// CoordinatedResult is meshd's coordinated mode: three candidates (stable
// local, stable remote, canary) of one prioritized election, each with the
// coordinator election its process would run.
type CoordinatedResult struct {
	// Flip is the default flipped between stable and canary, as in the
	// steal scenario: Start, Stop and Done from the change of the webhook.
	Flip StealResult
	// Stop is from cancelling the local stable holder (a graceful stop) to
	// the next best candidate's run function start.
	Stop Durations
	// Direct counts the stops after which the Lease went straight to the
	// next best candidate: no other holder, and no empty holder, between.
	Direct  int
	Overlap Overlap
	Errors  []string
}

// coordLock is the Lease of the coordinated scenario.
const coordLock = "coordinated"

// RunCoordinated measures the coordinated mode on env, whose API server
// must serve LeaseCandidates (CoordinatedAPIServerFlags).
func RunCoordinated(ctx context.Context, env *Env, cfg Config) CoordinatedResult {
	res := CoordinatedResult{Flip: StealResult{Impl: Meshd}}
	tr := NewTracker()
	if err := runCoordinated(ctx, env, cfg, tr, &res); err != nil {
		res.Errors = append(res.Errors, err.Error())
		cfg.logf("  coordinated: %v", err)
	}
	res.Overlap = tr.Overlap()
	res.Flip.Overlap = res.Overlap
	return res
}

func runCoordinated(ctx context.Context, env *Env, cfg Config, tr *Tracker, res *CoordinatedResult) (err error) {
	ns, err := env.NewNamespace(ctx, "coordinated")
	if err != nil {
		return err
	}
	if err := setWebhookDefault(ctx, env, ns, revB); err != nil {
		return err
	}
	holders, stopWatch, err := watchHolders(ctx, env, ns)
	if err != nil {
		return err
	}
	defer stopWatch()
	s := &coordSet{env: env, ns: ns, cfg: cfg, tr: tr}
	defer func() {
		if e := s.stopAll(); e != nil && err == nil {
			err = e
		}
	}()
	local, err := s.start("stable-0", revB, false)
	if err != nil {
		return err
	}
	if err := waitUntil(ctx, cfg.settleTimeout(), "stable-0 to lead", local.le.IsLeader); err != nil {
		return err
	}
	if _, err := s.start("stable-remote", revB, true); err != nil {
		return err
	}
	canary, err := s.start("canary", revA, false)
	if err != nil {
		return err
	}
	if err := coordinatedFlips(ctx, s, local, canary, &res.Flip); err != nil {
		return err
	}
	return coordinatedStops(ctx, s, holders, res)
}

// coordinatedFlips flips the default between the local stable instance's
// revision and the canary's, cfg.Trials times, and ends with stable.
func coordinatedFlips(ctx context.Context, s *coordSet, stable, canary *coordInstance, res *StealResult) error {
	revOf := map[*coordInstance]string{stable: revB, canary: revA}
	for i := 0; i < s.cfg.Trials && ctx.Err() == nil; i++ {
		old, next := stable, canary
		if i%2 == 1 {
			old, next = canary, stable
		}
		if err := s.settle(ctx, old); err != nil {
			return fmt.Errorf("flip %d: %w", i, err)
		}
		t0 := time.Now()
		if err := setWebhookDefault(ctx, s.env, s.ns, revOf[next]); err != nil {
			return err
		}
		st, sp, err := s.handover(t0, old, next)
		if err != nil {
			return fmt.Errorf("flip %d: %w", i, err)
		}
		res.Start, res.Stop, res.Done = append(res.Start, st), append(res.Stop, sp), append(res.Done, max(st, sp))
		s.cfg.logf("  coordinated flip %d: new leader after %s, old stopped after %s", i, fmtDur(st), fmtDur(sp))
	}
	if s.cfg.Trials%2 == 1 {
		return setWebhookDefault(ctx, s.env, s.ns, revB)
	}
	return nil
}

// coordinatedStops stops the local stable holder cfg.Trials times and
// measures the handover to the remote stable instance, the next best; a
// new local stable instance then joins and takes the lock back.
func coordinatedStops(ctx context.Context, s *coordSet, holders *holderLog, res *CoordinatedResult) error {
	remote := s.byID("stable-remote")
	for i := 0; i < s.cfg.Trials && ctx.Err() == nil; i++ {
		local := s.byID(fmt.Sprintf("stable-%d", i))
		if err := s.settle(ctx, local); err != nil {
			return fmt.Errorf("stop %d: %w", i, err)
		}
		from := holders.len()
		t0 := time.Now()
		if err := local.stop(s.cfg.stopTimeout()); err != nil {
			return err
		}
		next, err := s.tr.WaitFor(s.cfg.takeoverTimeout(), "stable-remote to start", func(iv ledger.Interval) bool {
			return iv.Holder == remote.id && iv.Start.After(t0)
		})
		if err != nil {
			return fmt.Errorf("stop %d: %w", i, err)
		}
		d := next.Start.Sub(t0)
		res.Stop = append(res.Stop, d)
		// The watch may deliver the remote's write after its work started.
		if err := waitUntil(ctx, 5*time.Second, "the Lease to name stable-remote", func() bool {
			seq := holders.since(from)
			return seq[len(seq)-1] == remote.name
		}); err != nil {
			return fmt.Errorf("stop %d: %w", i, err)
		}
		seq := holders.since(from)
		if slices.Equal(seq, []string{local.name, remote.name}) {
			res.Direct++
		}
		s.cfg.logf("  coordinated stop %d: next best after %s, holders %v", i, fmtDur(d), seq)
		if _, err := s.start(fmt.Sprintf("stable-%d", i+1), revB, false); err != nil {
			return err
		}
	}
	return nil
}

// coordInstance is one candidate and its coordinator election, as one
// meshd process runs them, on its own counted clientset.
type coordInstance struct {
	id, name string // meshd identity; LeaseCandidate name (the Lease holder)
	le       *election.LeaderElection
	cancel   context.CancelFunc
	done     chan struct{}
}

// stop cancels both elections (the candidate releases or hands over its
// lock) and waits up to timeout for them to return.
func (c *coordInstance) stop(timeout time.Duration) error {
	c.cancel()
	select {
	case <-c.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s did not stop within %v", c.id, timeout)
	}
}

// coordSet is the running instances of the scenario.
type coordSet struct {
	env *Env
	ns  string
	cfg Config
	tr  *Tracker
	all []*coordInstance
}

func (s *coordSet) start(id, rev string, remote bool) (*coordInstance, error) {
	client, err := newClient(s.env.Config, NewCounter())
	if err != nil {
		return nil, err
	}
	// The candidate and the coordinator are one process: they share one
	// roster of candidates and one watch of the default revision.
	opts := []election.Option{election.WithTTL(s.cfg.TTL),
		election.WithStopTimeout(election.DefaultStopTimeout),
		election.WithShared(election.NewShared())}
	le, err := election.New(client, election.Spec{Namespace: s.ns, ElectionID: coordLock, Identity: id,
		Revision: rev, Remote: remote, Lock: election.LeaseLock, Mode: election.Coordinated}, opts...)
	if err != nil {
		return nil, err
	}
	work := s.tr.Work(coordLock, id)
	le.Add(func(ctx context.Context) error { work(ctx); return nil })
	coord, err := election.NewCoordinator(client, s.ns, id, nil, opts...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &coordInstance{id: id, name: coordinated.CandidateName(coordLock, id), le: le, cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = coord.RunContext(ctx) }()
	go func() { defer wg.Done(); _ = le.RunContext(ctx) }()
	go func() { wg.Wait(); close(c.done) }()
	s.all = append(s.all, c)
	return c, nil
}

func (s *coordSet) byID(id string) *coordInstance {
	for _, c := range s.all {
		if c.id == id {
			return c
		}
	}
	return nil
}

func (s *coordSet) running() []*coordInstance {
	var out []*coordInstance
	for _, c := range s.all {
		select {
		case <-c.done:
		default:
			out = append(out, c)
		}
	}
	return out
}

// settle waits until want alone leads, every running instance sees it
// hold the Lease, and a steady pause has passed.
func (s *coordSet) settle(ctx context.Context, want *coordInstance) error {
	if want == nil {
		return fmt.Errorf("no such instance")
	}
	err := waitUntil(ctx, s.cfg.takeoverTimeout(), want.id+" to lead, seen by all", func() bool {
		for _, c := range s.running() {
			if c.le.IsLeader() != (c == want) || c.le.Status().Holder != want.name {
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	return sleep(ctx, s.cfg.steadyPause())
}

// handover waits for next's run function to start and old's term running
// at t0 to stop, and returns both delays from t0.
func (s *coordSet) handover(t0 time.Time, old, next *coordInstance) (start, stop time.Duration, err error) {
	started, err := s.tr.WaitFor(s.cfg.takeoverTimeout(), next.id+" to start", func(iv ledger.Interval) bool {
		return iv.Holder == next.id && iv.Start.After(t0)
	})
	if err != nil {
		return 0, 0, err
	}
	stopped, err := s.tr.WaitFor(s.cfg.takeoverTimeout(), old.id+" to stop", func(iv ledger.Interval) bool {
		return iv.Holder == old.id && iv.Start.Before(t0) && iv.Stop.After(t0)
	})
	if err != nil {
		return 0, 0, err
	}
	return started.Start.Sub(t0), stopped.Stop.Sub(t0), nil
}

func (s *coordSet) stopAll() error {
	var first error
	for _, c := range s.running() {
		if err := c.stop(s.cfg.stopTimeout()); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// setWebhookDefault makes rev the default revision of the mesh in ns
// through the webhook label, as istioctl does.
func setWebhookDefault(ctx context.Context, env *Env, ns, rev string) error {
	hooks := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	name := revisions.DefaultWebhookName(ns)
	wh, err := hooks.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		wh = &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{revisions.DefaultRevisionLabel: rev}}}
		if _, err := hooks.Create(ctx, wh, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("default revision: %w", err)
		}
		return nil
	}
	if wh.Labels == nil {
		wh.Labels = map[string]string{}
	}
	wh.Labels[revisions.DefaultRevisionLabel] = rev
	if _, err := hooks.Update(ctx, wh, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("default revision: %w", err)
	}
	return nil
}

// holderLog is every holder the scenario's Lease named, in order.
type holderLog struct {
	mu      sync.Mutex
	holders []string
}

func (h *holderLog) add(holder string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.holders); n == 0 || h.holders[n-1] != holder {
		h.holders = append(h.holders, holder)
	}
}

func (h *holderLog) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.holders)
}

// since returns the holders recorded from index i on, and the one before
// it, if any, which was the holder at that time.
func (h *holderLog) since(i int) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.holders[max(i-1, 0):])
}

// watchHolders records every holder of the scenario's Lease until stop.
func watchHolders(ctx context.Context, env *Env, ns string) (*holderLog, func(), error) {
	w, err := env.Client.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", coordLock).String(),
	})
	if err != nil {
		return nil, nil, err
	}
	log := &holderLog{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if l, ok := ev.Object.(*coordinationv1.Lease); ok && ev.Type != watch.Deleted {
				holder := ""
				if l.Spec.HolderIdentity != nil {
					holder = *l.Spec.HolderIdentity
				}
				log.add(holder)
			}
		}
	}()
	return log, func() { w.Stop(); <-done }, nil
}
