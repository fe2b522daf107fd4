package election

import (
	"fmt"
	"slices"

	"github.com/hashicorp/go-multierror"

	"github.com/meshd-io/meshd/internal/election/session"
	"github.com/meshd-io/meshd/pkg/election/elector"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// election is what decides which options apply to an election: its
// protocol, as its Spec and options declare it.
type election struct {
	enabled      bool
	prioritized  bool // follows the steal rule: not per revision, WithPrioritized(true), not the coordinator
	perRevision  bool
	mode         Mode // defaulted
	coordinator  bool // the coordinator's own election
	lockNamed    bool // the Spec names its lock kind
	sessions     bool
	watcherGiven bool // WithDefaultWatcher, here or in the Group's options
	identity     bool // the Spec names its identity
	lock         LockKind
}

// followsDefault reports whether the election reads the default revision.
func (e election) followsDefault() bool {
	return e.enabled && (e.coordinator || (!e.perRevision && e.prioritized))
}

// ruleOf returns the rule that says why the option name does not apply
// to an election ("" when it applies); false for an option this file does
// not know, which always applies. One case per option, so that an option
// added is a line added.
func ruleOf(name string) (func(e election) string, bool) {
	switch name {
	case "WithEnabled", "WithLogger", "WithLogr", "testknobs.RunBackoff", "withClock":
		return always, true
	case "WithShared":
		return sharedApplies, true
	case "WithTTL", "testknobs.Timing", "WithStopTimeout", "WithReleaseOnCancel", "WithWatch", "WithPodIdentity", "WithPodFailover":
		return enabledOnly, true
	case "testknobs.Metrics", "WithPrometheus", "WithEvents", "testknobs.EventRecorder":
		return enabledOnly, true
	case "WithPrioritized":
		return prioritizedApplies, true
	case "WithDefaultLock":
		return defaultLockApplies, true
	case "WithHandover", "testknobs.StartAtOnceAfterSteal":
		return stealingOnly, true
	case "WithDefaultWatcher":
		return followsDefaultOnly, true
	case "WithRevisionWebhook":
		return revisionWebhookApplies, true
	case "testknobs.ReleaseYieldStep":
		return yieldStepApplies, true
	case "WithSessions":
		return sessionsApply, true
	case "WithBinaryVersion":
		return coordinatedOnly, true
	case "WithCandidateOwner":
		return candidateOwnerApplies, true
	}
	return nil, false
}

func always(election) string { return "" }

func enabledOnly(e election) string {
	if !e.enabled {
		return "leader election is disabled (WithEnabled(false))"
	}
	return ""
}

func sharedApplies(e election) string {
	if !e.enabled && e.identity {
		return "with leader election disabled and the Spec naming its identity, nothing is shared"
	}
	return ""
}

func prioritizedApplies(e election) string {
	switch {
	case !e.enabled:
		return enabledOnly(e)
	case e.perRevision:
		return "a per-revision election never takes the lock from its holder"
	case e.coordinator:
		return "the coordinator's election never takes the lock from its holder"
	}
	return ""
}

func defaultLockApplies(e election) string {
	switch {
	case !e.enabled:
		return enabledOnly(e)
	case e.lockNamed:
		return "the Spec names its lock kind"
	case e.perRevision:
		return "a per-revision election always uses a Lease lock"
	case e.mode.coordinatedMode():
		return fmt.Sprintf("a %s election always uses a Lease lock", e.mode)
	}
	return ""
}

// stealingOnly is for the options of a candidate that takes the lock from
// a holder by the steal rule: only a racing, prioritized election does.
func stealingOnly(e election) string {
	if why := prioritizedApplies(e); why != "" {
		return why
	}
	switch {
	case e.mode.coordinatedMode():
		return fmt.Sprintf("in a %s election no candidate takes the lock from its holder: a coordinator moves it", e.mode)
	case !e.prioritized:
		return "WithPrioritized(false): no candidate takes the lock from its holder"
	}
	return ""
}

// yieldStepApplies: only a prioritized election ranks its candidates after
// a release; the coordinator's own election follows the default revision
// for its coordinator, not to rank itself.
func yieldStepApplies(e election) string {
	if e.coordinator {
		return "the coordinator's own election does not rank its candidates"
	}
	return followsDefaultOnly(e)
}

func followsDefaultOnly(e election) string {
	switch {
	case !e.enabled:
		return enabledOnly(e)
	case e.perRevision:
		return "a per-revision election does not follow the default revision"
	case !e.followsDefault():
		return "WithPrioritized(false): the election does not follow the default revision"
	}
	return ""
}

func revisionWebhookApplies(e election) string {
	if why := followsDefaultOnly(e); why != "" {
		return why
	}
	if e.watcherGiven {
		return "WithDefaultWatcher gives the default revision"
	}
	return ""
}

func sessionsApply(e election) string {
	switch {
	case !e.enabled:
		return enabledOnly(e)
	case e.mode.coordinatedMode():
		return fmt.Sprintf("sessions apply to racing elections only, not %s ones", e.mode)
	case e.lock != LeaseLock:
		return "sessions need a Lease lock: a holder's session heartbeat must come back through the same watch as its lock"
	}
	return ""
}

func coordinatedOnly(e election) string {
	switch {
	case !e.enabled:
		return enabledOnly(e)
	case !e.mode.coordinatedMode():
		return "only a coordinated election publishes a candidate"
	}
	return ""
}

func candidateOwnerApplies(e election) string {
	if why := coordinatedOnly(e); why != "" && !(e.enabled && e.sessions) {
		return why + ", and the election has no session (WithSessions)"
	}
	return ""
}

// inapplicable reports every option passed for one election that does not
// apply to it, by name; raw is the Spec as given, spec with its defaults.
func (o *options) inapplicable(raw, spec Spec) error {
	e := o.election(raw, spec)
	var errs *multierror.Error
	seen := map[string]bool{}
	for _, name := range o.given {
		rule, known := ruleOf(name)
		if seen[name] || !known {
			continue
		}
		seen[name] = true
		if why := rule(e); why != "" {
			errs = multierror.Append(errs, fmt.Errorf("%s does not apply: %s", name, why))
		}
	}
	return errs.ErrorOrNil()
}

// fit drops what a program-wide option (see Defaults) set that does not
// fit the election. Of them only a session would make the election fail:
// the others are read only by the protocols they apply to.
func (o *options) fit(raw, spec Spec) {
	if o.sessions && !slices.Contains(o.given, "WithSessions") && sessionsApply(o.election(raw, spec)) != "" {
		o.sessions = false
	}
}

// election describes the election of raw (as given) and spec (with its
// defaults) with o, for the rules.
func (o *options) election(raw, spec Spec) election {
	return election{
		enabled:      o.enabled,
		prioritized:  o.prioritized && !o.coordinator,
		perRevision:  spec.PerRevision,
		mode:         spec.Mode,
		coordinator:  o.coordinator,
		lockNamed:    raw.Lock != "",
		sessions:     o.sessions,
		watcherGiven: o.watcher != nil,
		identity:     raw.Identity != "",
		lock:         spec.Lock,
	}
}

// buildProbe receives the configurations build makes of an election, for
// this package's tests, which compare them between combinations of
// options. A nil probe receives nothing.
type buildProbe struct {
	electorConfig elector.Config
	lockConfig    resourcelock.Config
	sessionConfig *session.Config
}

func (p *buildProbe) elector(cfg elector.Config, lock resourcelock.Config) {
	if p != nil {
		p.electorConfig, p.lockConfig = cfg, lock
	}
}

func (p *buildProbe) session(cfg session.Config) {
	if p != nil {
		p.sessionConfig = &cfg
	}
}
