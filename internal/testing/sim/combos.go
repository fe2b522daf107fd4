package sim

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/internal/election/testknobs"
	"github.com/meshd-io/meshd/internal/protocol"
	"github.com/meshd-io/meshd/internal/protocol/coordination"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/election/elector"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Values of a Combination's settings. NotApplicable marks a setting that
// the library refuses for the rest of the combination in every value but
// its default: a user cannot write it, and the candidate runs without it.
const (
	On            = "on"
	Off           = "off"
	Broken        = "broken" // Watch: on, and the world breaks it for a while
	NotApplicable = "-"
)

// Election modes, election kinds, locks and locations of a Combination.
const (
	ModeRacing      = string(election.Racing)
	ModeCoordinated = string(election.Coordinated)
	ModeOldest      = string(election.OldestEmulationVersion)
	Prioritized     = "prioritized"
	PerRevision     = "per-revision"
	LockConfigMap   = "configmap"
	LockLease       = "lease"
	// LockMulti is resourcelock's MultiLock (a ConfigMap and a Lease of one
	// name, the ConfigMap first): the step of a migration from ConfigMap to
	// Lease. Package election does not offer it; a program builds it with
	// resourcelock.New and runs an elector on it, so elector.Config's
	// validation is what accepts or refuses its settings.
	LockMulti = "multilock"
	Local     = "local"
	Remote    = "remote"
)

// Combination is one way a user can configure a candidate: the
// election's mode, kind and lock, and the settings of the candidate's
// options. Settings shared by the election (everything but Handover, Watch
// and Location) are the same for every candidate of a schedule.
type Combination struct {
	Mode        string // ModeRacing, ModeCoordinated or ModeOldest
	Election    string // Prioritized or PerRevision
	Lock        string // LockConfigMap, LockLease or LockMulti
	Sessions    string // On, Off or NotApplicable
	StartAtOnce string // On (WithStartAtOnceAfterSteal), Off or NotApplicable
	Handover    string // On, Off or NotApplicable
	Watch       string // On, Off, Broken or NotApplicable (polls)
	Location    string // Local, Remote or NotApplicable (local)
	// PodFailover: On (WithPodFailover: take over on a kubelet-reported
	// exit of the holder's process), Off or NotApplicable.
	PodFailover string
}

func (c Combination) String() string {
	return fmt.Sprintf("mode=%s election=%s lock=%s sessions=%s start-at-once=%s handover=%s watch=%s location=%s pod-failover=%s",
		c.Mode, c.Election, c.Lock, c.Sessions, c.StartAtOnce, c.Handover, c.Watch, c.Location, c.PodFailover)
}

// shared is the part of c that every candidate of one schedule shares.
func (c Combination) shared() Combination {
	c.Handover, c.Watch, c.Location, c.PodFailover = "", "", "", ""
	return c
}

// toggle is one option of package election with its two values; given
// reports whether the value differs from the option's default (a value
// equal to the default is written by leaving the option out).
type toggle struct {
	name   string
	option func(on bool) election.Option
	dflt   bool
}

var toggles = []toggle{
	{"WithSessions", func(on bool) election.Option { return election.WithSessions(on) }, false},
	{"WithStartAtOnceAfterSteal", func(on bool) election.Option { return testknobs.StartAtOnceAfterSteal(on) }, false},
	{"WithHandover", func(on bool) election.Option { return election.WithHandover(on, 0) }, true},
	{"WithWatch", func(on bool) election.Option { return election.WithWatch(on) }, true},
	{"WithPodFailover", func(on bool) election.Option { return election.WithPodFailover(on) }, false},
}

// accepts asks package election's New whether it builds an election of
// spec with the toggles set as values says (On, Off; NotApplicable leaves
// the option out). The error names every option it refuses.
func accepts(spec election.Spec, values [5]string) error {
	var opts []election.Option
	for i, t := range toggles {
		switch values[i] {
		case On:
			if !t.dflt {
				opts = append(opts, t.option(true))
			}
		case Off:
			if t.dflt {
				opts = append(opts, t.option(false))
			}
		}
	}
	_, err := election.New(fake.NewClientset(), spec, opts...)
	return err
}

// electionCombinations lists what package election accepts for locks
// ConfigMap and Lease: for every Spec it accepts, an option is
// NotApplicable when New refuses its value other than the default by name,
// and the values of the others are every product New accepts.
func electionCombinations() []Combination {
	var out []Combination
	for _, mode := range []election.Mode{election.Racing, election.Coordinated, election.OldestEmulationVersion} {
		for _, perRevision := range []bool{false, true} {
			for _, lock := range []election.LockKind{election.ConfigMapLock, election.LeaseLock} {
				for _, remote := range []bool{false, true} {
					spec := election.Spec{Namespace: Namespace, ElectionID: "combo", Identity: "a", Revision: "stable",
						Remote: remote, Lock: lock, PerRevision: perRevision, Mode: mode}
					if accepts(spec, [5]string{}) != nil {
						continue
					}
					var choices [5][]string
					for i, t := range toggles {
						var probe [5]string
						probe[i] = Off
						if !t.dflt {
							probe[i] = On
						}
						if err := accepts(spec, probe); err != nil && strings.Contains(err.Error(), t.name) {
							choices[i] = []string{NotApplicable}
						} else {
							choices[i] = []string{On, Off}
						}
					}
					for _, values := range product(choices) {
						if accepts(spec, values) != nil {
							continue
						}
						c := Combination{Mode: string(mode), Election: Prioritized, Lock: LockLease,
							Sessions: values[0], StartAtOnce: values[1], Handover: values[2], Watch: values[3], Location: Local,
							PodFailover: values[4]}
						if perRevision {
							c.Election = PerRevision
						}
						if lock == election.ConfigMapLock {
							c.Lock = LockConfigMap
						}
						if remote {
							c.Location = Remote
						}
						out = append(out, c)
					}
				}
			}
		}
	}
	return out
}

// product is every choice of one value per slot.
func product(choices [5][]string) [][5]string {
	out := [][5]string{{}}
	for i := range choices {
		var next [][5]string
		for _, prefix := range out {
			for _, v := range choices[i] {
				p := prefix
				p[i] = v
				next = append(next, p)
			}
		}
		out = next
	}
	return out
}

// multiLockCombinations lists what elector.Config's validation accepts on
// a MultiLock, with the configuration the sim gives a candidate (see
// candidate.electorConfig): a session, a coordination, the handover, a
// start at once and a watch each set or not. Package election's kinds of
// election do not reach it, so it is a prioritized racing election (the
// steal rule as KeyComparison), local or remote.
func multiLockCombinations() []Combination {
	var out []Combination
	lock, err := resourcelock.New(resourcelock.ConfigMapsLeasesResourceLock, Namespace, LockName, fake.NewClientset(),
		resourcelock.Config{Identity: "a", Key: "stable", Cooperative: true})
	if err != nil {
		panic(fmt.Sprintf("sim: a MultiLock cannot be built: %v", err))
	}
	t := DefaultTiming()
	valid := func(edit func(*elector.Config)) bool {
		cfg := elector.Config{
			Name: LockName, Lock: lock, LeaseDuration: t.LeaseDuration, RenewDeadline: t.RenewDeadline,
			RetryPeriod: t.RetryPeriod, StopTimeout: t.StopTimeout,
			Callbacks:     elector.Callbacks{OnStartedLeading: func(context.Context) error { return nil }},
			KeyComparison: func(string) bool { return false },
		}
		edit(&cfg)
		return cfg.Validate() == nil
	}
	choice := func(edit func(*elector.Config)) []string {
		if valid(edit) {
			return []string{On, Off}
		}
		return []string{NotApplicable}
	}
	sessions := choice(func(c *elector.Config) { c.Session = noSession{}; c.Watch = true })
	coordinated := valid(func(c *elector.Config) {
		c.KeyComparison = nil
		c.Coordination = coordination.New(coordination.Config{LeaseDuration: t.LeaseDuration})
	})
	handover := choice(func(c *elector.Config) {
		c.Handover = noHandover{grace: t.HandoverGrace}
	})
	atOnce := choice(func(c *elector.Config) { c.StartAtOnceAfterSteal = true })
	watch := choice(func(c *elector.Config) { c.Watch = true })
	podFailover := choice(func(c *elector.Config) { c.HolderExit = noExit{} })
	if coordinated {
		panic("sim: a MultiLock accepts Coordination; the sim does not run coordinated elections on one")
	}
	for _, s := range sessions {
		for _, a := range atOnce {
			for _, h := range handover {
				for _, w := range watch {
					for _, loc := range []string{Local, Remote} {
						for _, p := range podFailover {
							out = append(out, Combination{Mode: ModeRacing, Election: Prioritized, Lock: LockMulti,
								Sessions: s, StartAtOnce: a, Handover: h, Watch: w, Location: loc, PodFailover: p})
						}
					}
				}
			}
		}
	}
	return out
}

// noSession is a Sessions that is never used: it only lets the validation
// of elector.Config judge whether a session fits.
type noSession struct{ protocol.Sessions }

// noHandover is a Handover that is only asked for its grace, for the same
// purpose.
type noHandover struct {
	protocol.Handover
	grace time.Duration
}

func (h noHandover) Grace() time.Duration { return h.grace }

// noExit is a HolderExit that is never asked, for the same purpose.
type noExit struct{ protocol.HolderExit }

// withBrokenWatch adds, for every combination with the watch on, the same
// with the watch broken for a while by the world.
func withBrokenWatch(cs []Combination) []Combination {
	out := append([]Combination(nil), cs...)
	for _, c := range cs {
		if c.Watch == On {
			c.Watch = Broken
			out = append(out, c)
		}
	}
	return out
}

var (
	acceptedOnce sync.Once
	accepted     []Combination
)

// AcceptedCombinations is every combination the library accepts, in a
// fixed order: package election's for locks ConfigMap and Lease, and
// elector.Config's for the MultiLock, each with the watch on, off or
// broken where the watch is on.
func AcceptedCombinations() []Combination {
	acceptedOnce.Do(func() {
		all := withBrokenWatch(append(electionCombinations(), multiLockCombinations()...))
		sort.SliceStable(all, func(i, k int) bool { return all[i].String() < all[k].String() })
		accepted = all
	})
	return accepted
}

// combinationsOf returns the accepted combinations of one mode of
// TestSimulation: with sessions on (session mode) or not (classic).
func combinationsOf(sessions bool) []Combination {
	var out []Combination
	for _, c := range AcceptedCombinations() {
		if (c.Sessions == On) == sessions {
			out = append(out, c)
		}
	}
	return out
}

// combinationFor is the combination of the first candidate of the schedule
// of seed: the accepted combinations of its mode taken in turn, so that any
// len(combinationsOf(sessions)) consecutive seeds draw every one of them.
func combinationFor(seed int64, sessions bool) Combination {
	return turnOf(seed, combinationsOf(sessions))
}

// turnOf is the combination of list whose turn seed is.
func turnOf(seed int64, list []Combination) Combination {
	i := seed % int64(len(list))
	if i < 0 {
		i += int64(len(list))
	}
	return list[i]
}

// configure gives the schedule drawn so far the configuration of first
// for its first candidate, and to each other candidate a combination of
// pool that shares first's election settings (mode, kind, lock, sessions,
// start at once), drawn at random. It draws after every other choice, so
// the rest of the schedule is what generateClassic (or generateSessions)
// draws.
//
// With pods, every candidate runs in a Pod of its own and the kubelet's
// delay and faults are drawn last (podFaults); without, the schedule is
// as the generator drew it before Pods were simulated (withoutPods).
func (g *generator) configure(first Combination, pool []Combination, pods bool) {
	s := g.s
	var peers []Combination
	for _, c := range pool {
		if c.shared() == first.shared() {
			peers = append(peers, c)
		}
	}
	s.Mode = first.Mode
	s.PerRevision = first.Election == PerRevision
	s.StartAtOnce = first.StartAtOnce == On
	s.Truth = g.initialTruth
	switch first.Lock {
	case LockConfigMap:
		s.LockKind = resourcelock.ConfigMapsResourceLock
	case LockLease:
		s.LockKind = resourcelock.LeasesResourceLock
	case LockMulti:
		s.LockKind = resourcelock.ConfigMapsLeasesResourceLock
	}
	if s.LockKind != resourcelock.LeasesResourceLock && s.Timing == smallTiming() {
		// Whole seconds in a ConfigMap record (see generateClassic).
		s.Timing = DefaultTiming()
	}
	revision := s.Candidates[0].Revision
	s.Combinations = nil
	for i := range s.Candidates {
		c := first
		if i > 0 {
			c = peers[g.r.Intn(len(peers))]
		}
		spec := &s.Candidates[i]
		spec.Watch = c.Watch == On || c.Watch == Broken
		spec.Cooperative = c.Handover == On
		spec.Remote = c.Location == Remote
		spec.Session = c.Sessions == On
		if pods {
			spec.Pod = "pod-" + spec.Name
			spec.PodFailover = c.PodFailover == On
		}
		if s.PerRevision {
			spec.Revision = revision
		}
		if c.Watch == Broken {
			g.breakWatchOf(spec.Name)
		}
		s.Combinations = append(s.Combinations, c)
	}
	switch {
	case s.coordinated():
		// Holders of client-go's shape race; they have no part in an
		// election a coordinator decides.
		s.Istiods, s.Setup = nil, nil
		for i, at := range g.flips {
			def := g.flipTruths[i]
			g.add(at, "the webhook names default "+def, func(w *World) { w.SetTruth(def) })
		}
	case s.PerRevision:
		for i := range s.Istiods {
			s.Istiods[i].Key = revision
		}
	}
	if pods {
		g.podFaults()
	}
}

// withoutPods is list as it was before Pods were simulated: the
// combinations without Pod-aware failover, in the same order, so that a
// seed named then (drawnSessionSeed) draws its old configuration.
func withoutPods(list []Combination) []Combination {
	var out []Combination
	for _, c := range list {
		if c.PodFailover != On {
			out = append(out, c)
		}
	}
	return out
}

// podFaults draws the kubelet's delay and none to two faults of Pods: a
// forced delete of a candidate's Pod, or a partition of its node.
func (g *generator) podFaults() {
	g.s.KubeletDelay = g.dur(200*time.Millisecond, 1500*time.Millisecond)
	for k := g.r.Intn(3); k > 0; k-- {
		at := time.Second + time.Duration(g.r.Int63n(int64(g.s.Duration-4*time.Second)))
		name := g.pick()
		if g.r.Intn(2) == 0 {
			back := g.dur(300*time.Millisecond, 2*time.Second)
			g.add(at, "delete the Pod of "+name+" by force", func(w *World) { w.ForceDeletePod(name, back) })
			continue
		}
		d := g.dur(time.Second, 2*g.s.Timing.LeaseDuration)
		g.add(at, "partition the node of "+name, func(w *World) { w.PartitionNode(name, d) })
	}
}

// breakWatchOf breaks the watches of candidate name once, early enough in
// the schedule that it runs, for one to four seconds.
func (g *generator) breakWatchOf(name string) {
	at := g.dur(time.Second, g.s.Duration/2)
	d := g.dur(time.Second, 4*time.Second)
	g.add(at, "watch of "+name+" breaks", func(w *World) {
		w.Loosen()
		w.Fault("broken watch of "+name, d, func(w *World) { w.breakWatch(name) },
			func(w *World) { w.state(name).setWatchBroken(false) })
	})
}
