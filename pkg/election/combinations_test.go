package election

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/meshd-io/meshd/internal/election/defaultwatch"
	"github.com/meshd-io/meshd/internal/metrics"
	"github.com/meshd-io/meshd/internal/protocol/handover"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/meshd-io/meshd/pkg/election/elector"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// The defaults the combinations are read against: the candidate is of
// revision "canary"; istiod's webhook names "stable" the default, the
// custom webhook of WithRevisionWebhook "canary", the watcher of
// WithDefaultWatcher "prod". Each source thus ranks the candidate
// differently, and the steal rule and the release yield show which one the
// election reads.
const (
	comboRevision = "canary"
	customWebhook = "custom-tag"
	customLabel   = "custom.io/rev"
)

// comboKind is one protocol an election can be built with: a Spec (or the
// coordinator's constructor) with the options that make the protocol.
type comboKind struct {
	name  string
	spec  Spec
	opts  []Option
	build func(client kubernetes.Interface, spec Spec, opts ...Option) (*LeaderElection, error)
}

// comboOption is one option in a value other than its default; make
// returns a fresh one for every build (a Prometheus registry takes a
// collector once).
type comboOption struct {
	name string
	make func(w *comboWorld) Option
}

// comboWorld is what the options of one build point to, so that the
// election's configuration can be compared with it.
type comboWorld struct {
	clock    *clocktesting.FakeClock
	shared   *Shared
	recorder *comboRecorder
	metrics  *comboMetrics
}

type comboRecorder struct{}

func (comboRecorder) Eventf(runtime.Object, string, string, string, ...any) {}

type comboMetrics struct{ metrics.Metrics }

func comboKinds() []comboKind {
	spec := Spec{Namespace: testNS, ElectionID: "combo", Identity: "a", Revision: comboRevision}
	with := func(edit func(*Spec)) Spec {
		s := spec
		edit(&s)
		return s
	}
	return []comboKind{
		{name: "prioritized, lock by default", spec: spec},
		{name: "prioritized ConfigMap", spec: with(func(s *Spec) { s.Lock = ConfigMapLock })},
		{name: "prioritized Lease", spec: with(func(s *Spec) { s.Lock = LeaseLock })},
		{name: "prioritized remote", spec: with(func(s *Spec) { s.Remote = true })},
		{name: "prioritized Lease with sessions", spec: with(func(s *Spec) { s.Lock = LeaseLock }), opts: []Option{WithSessions(true)}},
		{name: "not prioritized", spec: spec, opts: []Option{WithPrioritized(false)}},
		{name: "per revision", spec: with(func(s *Spec) { s.PerRevision = true })},
		{name: "per revision with sessions", spec: with(func(s *Spec) { s.PerRevision = true }), opts: []Option{WithSessions(true)}},
		{name: "coordinated", spec: with(func(s *Spec) { s.Mode = Coordinated })},
		{name: "coordinated per revision", spec: with(func(s *Spec) { s.Mode, s.PerRevision = Coordinated, true })},
		{name: "oldest emulation version", spec: with(func(s *Spec) { s.Mode = OldestEmulationVersion })},
		{name: "disabled", spec: spec, opts: []Option{WithEnabled(false)}},
		{name: "disabled per revision", spec: with(func(s *Spec) { s.PerRevision = true }), opts: []Option{WithEnabled(false)}},
		{name: "coordinator", spec: Spec{Namespace: testNS, Identity: "a"}, build: func(client kubernetes.Interface, spec Spec, opts ...Option) (*LeaderElection, error) {
			return NewCoordinator(client, spec.Namespace, spec.Identity, nil, opts...)
		}},
	}
}

func comboOptions() []comboOption {
	return []comboOption{
		{"WithTTL", func(*comboWorld) Option { return WithTTL(10 * time.Second) }},
		{"testknobs.Timing", func(*comboWorld) Option { return withTiming(15*time.Second, 10*time.Second, 2*time.Second) }},
		{"WithSessions", func(*comboWorld) Option { return WithSessions(true) }},
		{"WithLogger", func(*comboWorld) Option { return WithLogger(zap.New(comboCore())) }},
		{"WithLogr", func(*comboWorld) Option { return WithLogr(funcr.New(func(string, string) {}, funcr.Options{})) }},
		{"withClock", func(w *comboWorld) Option { return withClock(w.clock) }},
		{"WithEnabled", func(*comboWorld) Option { return WithEnabled(false) }},
		{"WithPrioritized", func(*comboWorld) Option { return WithPrioritized(false) }},
		{"WithDefaultLock", func(*comboWorld) Option { return WithDefaultLock(LeaseLock) }},
		{"WithReleaseOnCancel", func(*comboWorld) Option { return WithReleaseOnCancel(false) }},
		{"WithStopTimeout", func(*comboWorld) Option { return WithStopTimeout(time.Second) }},
		{"WithWatch", func(*comboWorld) Option { return WithWatch(false) }},
		{"testknobs.StartAtOnceAfterSteal", func(*comboWorld) Option { return withStartAtOnceAfterSteal(true) }},
		{"WithHandover", func(*comboWorld) Option { return WithHandover(false, 0) }},
		{"testknobs.RunBackoff", func(*comboWorld) Option { return withRunBackoff(2*time.Second, 2*time.Minute) }},
		{"testknobs.ReleaseYieldStep", func(*comboWorld) Option { return withReleaseYieldStep(50 * time.Millisecond) }},
		{"WithDefaultWatcher", func(*comboWorld) Option { return WithDefaultWatcher(defaultwatch.NewStatic("prod")) }},
		{"WithRevisionWebhook", func(*comboWorld) Option { return WithRevisionWebhook(customWebhook, customLabel) }},
		{"testknobs.Metrics", func(w *comboWorld) Option { return withMetrics(w.metrics) }},
		{"WithPrometheus", func(*comboWorld) Option { return WithPrometheus(prometheus.NewRegistry()) }},
		{"testknobs.EventRecorder", func(w *comboWorld) Option { return withEventRecorder(w.recorder) }},
		{"WithEvents", func(*comboWorld) Option { return WithEvents(fake.NewClientset()) }},
		{"WithShared", func(w *comboWorld) Option { return WithShared(w.shared) }},
		{"WithBinaryVersion", func(*comboWorld) Option { return WithBinaryVersion("1.2.3") }},
		{"WithPodIdentity", func(*comboWorld) Option {
			return WithPodIdentity(PodIdentity{Namespace: testNS, Pod: "meshd-0", UID: "uid-0", Container: "meshd", ProcessStart: time.Unix(1700000000, 0)})
		}},
		{"WithPodFailover", func(*comboWorld) Option { return WithPodFailover(true) }},
		{"WithCandidateOwner", func(*comboWorld) Option {
			return WithCandidateOwner(&metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "meshd-0", UID: "uid-0"})
		}},
	}
}

// comboCore is a logger core that keeps what it is given, so that an
// election with it logs where one with the default logger does not.
func comboCore() zapcore.Core {
	core, _ := observer.New(zapcore.DebugLevel)
	return core
}

func comboWebhook(name, label, revision string) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{label: revision}},
	}
}

// TestEveryCombinationIsRefusedOrChangesBehaviour builds every protocol
// with every option, each in a value other than its default, and with the
// same protocol without it. New must either refuse the option, naming it,
// or build an election whose configuration (the elector's, the lock's, the
// session's and the candidate's, as build made them) or observable state
// (the default revision it reads, the steal rule and the release yield it
// applies, its identity, logging, clock and back-off) differs. A
// combination that is accepted and changes nothing fails the test.
func TestEveryCombinationIsRefusedOrChangesBehaviour(t *testing.T) {
	client := fake.NewClientset(
		comboWebhook(revisions.DefaultWebhookName(testNS), revisions.DefaultRevisionLabel, "stable"),
		comboWebhook(customWebhook, customLabel, "canary"),
	)
	options := comboOptions()
	for _, opt := range options {
		if _, known := ruleOf(opt.name); !known {
			t.Errorf("%s has no rule in applies.go that says where it applies", opt.name)
		}
	}
	refused, changed := 0, 0
	for _, kind := range comboKinds() {
		build := kind.build
		if build == nil {
			build = New
		}
		describe := func(extra func(*comboWorld) Option) (string, error) {
			w := &comboWorld{clock: clocktesting.NewFakeClock(time.Unix(1e9, 0)), shared: NewShared(), recorder: &comboRecorder{}, metrics: &comboMetrics{}}
			probe := &buildProbe{}
			opts := append([]Option{withProbe(probe)}, kind.opts...)
			if extra != nil {
				opts = append(opts, extra(w))
			}
			l, err := build(client, kind.spec, opts...)
			if err != nil {
				return "", err
			}
			return describeCombination(t, l, probe, w), nil
		}
		base, err := describe(nil)
		if err != nil {
			t.Fatalf("%s: the protocol itself is refused: %v", kind.name, err)
		}
		for _, opt := range options {
			if kindGives(kind, opt.name) {
				continue
			}
			got, err := describe(opt.make)
			switch {
			case err != nil && !strings.Contains(err.Error(), opt.name):
				t.Errorf("%s with %s: refused without naming the option: %v", kind.name, opt.name, err)
			case err != nil:
				refused++
			case got == base:
				t.Errorf("%s with %s: accepted, and nothing differs from the election without it:\n%s", kind.name, opt.name, got)
			default:
				changed++
			}
		}
	}
	t.Logf("%d combinations refused by name, %d change the election", refused, changed)
}

// kindGives reports whether the protocol already passes the option.
func kindGives(kind comboKind, name string) bool {
	probe := &options{}
	probe.applyEach(kind.opts)
	for _, given := range probe.given {
		if given == name {
			return true
		}
	}
	return false
}

// describeCombination renders what an election was built into, with
// nothing that differs between two builds of the same combination (no
// addresses): two builds differ in it exactly when they behave
// differently in what it covers.
func describeCombination(t *testing.T, l *LeaderElection, p *buildProbe, w *comboWorld) string {
	t.Helper()
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("spec %+v, lock %s, identity %s, enabled %v, prioritized %v", l.spec, l.lockName, l.holderIdentity, l.enabled, l.prioritized)
	line("run back-off %v up to %v; fake clock %v; logs %v", l.backoff.initial, l.backoff.max, l.clock == w.clock, l.log.Core().Enabled(zapcore.ErrorLevel))
	line("own event recorder %v; session wait %v", l.events != nil, l.sessionWait)

	stop := startComboWatchers(t, l)
	defer stop()
	line("default revision %q", l.defaultRevision())
	if l.coordinatorWatcher != nil {
		line("the coordinator follows the default revision %q", l.coordinatorWatcher.GetDefault())
	}
	if c := l.candidacy; c != nil {
		s := c.spec
		owner := ""
		if s.Owner != nil {
			owner = s.Owner.Name
		}
		line("candidate %s/%s %s identity %s key %s preempts %v strategy %s binary %q lease %v owner %q; roster of the given Shared %v",
			s.Namespace, s.LeaseName, s.Name, s.Identity, s.Key, s.Preempts, s.Strategy, s.BinaryVersion, s.LeaseDuration, owner, c.rosters == w.shared.rosters)
	}
	if !l.enabled {
		return b.String()
	}
	cfg := p.electorConfig
	line("elector %s: lease %v renew %v retry %v release %v stop %v at once %v watch %v grace %v",
		cfg.Name, cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod, cfg.ReleaseOnCancel, cfg.StopTimeout, cfg.StartAtOnceAfterSteal, cfg.Watch, handoverGrace(cfg))
	line("elector metrics %T, logs %v, fake clock %v, hub and pacer of the given Shared %v %v",
		cfg.Metrics, cfg.Logger.Core().Enabled(zapcore.ErrorLevel), cfg.Clock == w.clock, cfg.Hub == w.shared.hub, cfg.Pacer == w.shared.pacer)
	line("coordination %v, session %v, judge of the holder's exit %v", cfg.Coordination != nil, cfg.Session != nil, cfg.HolderExit != nil)
	keys := []string{"stable", "^stable", "canary", "^canary", "prod", "^prod"}
	if f := cfg.KeyComparison; f != nil {
		line("steals from %v", selectKeys(keys, f))
	}
	if p, ok := cfg.Handover.(*handover.Protocol); ok {
		f := p.Accepts
		line("hands over to %v", selectKeys(keys, f))
	}
	if f := cfg.YieldOnRelease; f != nil {
		line("yields %v after a release", f())
	}
	lc := p.lockConfig
	line("lock identity %s key %s cooperative %v events %T publishes its Pod %v", lc.Identity, lc.Key, lc.Cooperative, lc.EventRecorder, lc.HolderPod != nil)
	if s := p.sessionConfig; s != nil {
		owner := ""
		if s.Owner != nil {
			owner = s.Owner.Name
		}
		line("session %s/%s lease %v renew %v retry %v owner %q of the given Shared %v",
			s.Namespace, s.Identity, s.LeaseDuration, s.RenewDeadline, s.RetryPeriod, owner, s.Sessions == w.shared.sessions)
	}
	return b.String()
}

// handoverGrace is the grace of the cooperative preemption wired into cfg;
// zero without it.
func handoverGrace(cfg elector.Config) time.Duration {
	if cfg.Handover == nil {
		return 0
	}
	return cfg.Handover.Grace()
}

func selectKeys(keys []string, f func(string) bool) []string {
	var out []string
	for _, k := range keys {
		if f(k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// startComboWatchers runs the default-revision watchers the election reads
// until they have read the cluster, so that what the election reads from
// them is what it would read while running; the returned function stops
// them.
func startComboWatchers(t *testing.T, l *LeaderElection) (stop func()) {
	t.Helper()
	var stops []func()
	for _, w := range []revisions.DefaultWatcher{l.watcher, l.coordinatorWatcher} {
		if w == nil {
			continue
		}
		if s, ok := w.(defaultwatch.Starter); ok {
			stops = append(stops, s.Start())
		}
		deadline := time.Now().Add(10 * time.Second)
		for !w.HasSynced() {
			if time.Now().After(deadline) {
				t.Fatal("the default-revision watcher never synced")
			}
			time.Sleep(time.Millisecond)
		}
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

// Options that configure a whole program (NewGroup's, and those wrapped in
// Defaults) apply where they fit and are not refused elsewhere; options
// given for one election are refused where they do not apply, every one
// of them by name in one error.
func TestProgramOptionsApplyWhereTheyFitAndElectionOptionsAreStrict(t *testing.T) {
	client := fake.NewClientset()
	perRevision := Spec{Namespace: testNS, ElectionID: "per-rev", Identity: "a", PerRevision: true}
	prioritized := Spec{Namespace: testNS, ElectionID: "prio", Identity: "a", Lock: LeaseLock}
	programWide := []Option{WithHandover(false, 0), WithBinaryVersion("1.2.3"), WithDefaultLock(LeaseLock)}

	g, err := NewGroup(client, programWide...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.New(perRevision); err != nil {
		t.Errorf("a per-revision election refuses the group's options: %v", err)
	}
	probe := &buildProbe{}
	if _, err := g.New(prioritized, withProbe(probe)); err != nil {
		t.Fatal(err)
	}
	if handoverGrace(probe.electorConfig) != 0 || probe.lockConfig.Cooperative {
		t.Errorf("the group's WithHandover(false, 0) did not reach a prioritized election: grace %v, cooperative %v",
			handoverGrace(probe.electorConfig), probe.lockConfig.Cooperative)
	}
	if _, err := g.New(perRevision, WithHandover(false, 0)); err == nil || !strings.Contains(err.Error(), "WithHandover does not apply") {
		t.Errorf("Group.New with an option that does not apply: err %v, want it refused by name", err)
	}

	if _, err := New(client, perRevision, Defaults(programWide...)); err != nil {
		t.Errorf("a per-revision election refuses options given as Defaults: %v", err)
	}
	_, err = New(client, perRevision, append(programWide, withStartAtOnceAfterSteal(true), WithTTL(10*time.Second))...)
	if err == nil {
		t.Fatal("a per-revision election accepts WithHandover, WithBinaryVersion, WithDefaultLock and testknobs.StartAtOnceAfterSteal")
	}
	for _, name := range []string{"WithHandover", "WithBinaryVersion", "WithDefaultLock", "testknobs.StartAtOnceAfterSteal"} {
		if !strings.Contains(err.Error(), name+" does not apply") {
			t.Errorf("the error does not name %s: %v", name, err)
		}
	}
	if strings.Contains(err.Error(), "WithTTL") {
		t.Errorf("the error names WithTTL, which applies: %v", err)
	}
	// A program-wide session is kept by the elections it fits and left out
	// of the others (a coordinated one, one on a ConfigMap).
	sessions, err := NewGroup(client, WithSessions(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		spec        Spec
		wantSession bool
	}{
		{prioritized, true},
		{Spec{Namespace: testNS, ElectionID: "cm", Identity: "a", Lock: ConfigMapLock}, false},
		{Spec{Namespace: testNS, ElectionID: "coord", Identity: "a", Mode: Coordinated}, false},
	} {
		l, err := sessions.New(c.spec)
		if err != nil {
			t.Errorf("%s in a group with sessions: %v", c.spec.ElectionID, err)
			continue
		}
		if got := l.session != nil; got != c.wantSession {
			t.Errorf("%s in a group with sessions: session %v, want %v", c.spec.ElectionID, got, c.wantSession)
		}
	}
	// An option given for the election overrides a default and is checked.
	if _, err := New(client, perRevision, Defaults(WithPrioritized(true)), WithPrioritized(false)); err == nil {
		t.Error("WithPrioritized given for a per-revision election after Defaults is accepted")
	}
}

// The README's table of where options apply names every public option.
func TestReadmeSaysWhereEveryOptionApplies(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(readme), "| option | applies to |")
	table, _, _ = strings.Cut(table, "\n\n")
	for _, opt := range comboOptions() {
		if strings.HasPrefix(opt.name, "With") && !strings.Contains(table, "`"+opt.name+"`") {
			t.Errorf("the README's table of options does not say where %s applies", opt.name)
		}
	}
}
