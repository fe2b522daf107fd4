package chaos

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meshd-io/meshd/pkg/election/elector"
)

// Report is what a run found.
type Report struct {
	Seed      uint64
	Instances []string
	TTL       time.Duration
	// Mode is the instances' election mode ("" or racing, coordinated, ...).
	Mode string
	// Sessions is set when the instances renewed through sessions.
	Sessions bool
	// Bound is the liveness bound (see Bound).
	Bound time.Duration
	// Duration is how long faults were injected.
	Duration time.Duration
	Faults   []FaultRecord

	Kinds     []KindReport
	Elections []ElectionReport
	// WorstNoLeader is the longest time any election went without a leader,
	// counted from each fault's liveness reference.
	WorstNoLeader time.Duration
	// TermsPerFault is the number of terms started, in all elections
	// together, per fault injected.
	TermsPerFault float64

	// Failures, by check. Empty means the check passed.
	Overlaps   []Overlap
	Liveness   []string
	Thrash     []string
	Lost       []string
	Crashes    []string
	InjectErrs []string
	// Unclean lists instances that did not exit with status 0 after the
	// final SIGTERM; reported, not a failure.
	Unclean []string
}

// KindReport sums up the faults of one kind.
type KindReport struct {
	Kind     Kind
	Injected int
	// WorstGap is the longest stretch without a leader in any election
	// that began after a fault of this kind (and before the next fault),
	// from its beginning, including the time while the fault lasted.
	WorstGap time.Duration
	// WorstNoLeader is the longest time an election went without a leader
	// after a fault of this kind, counted from its liveness reference.
	WorstNoLeader time.Duration
	// OverBound counts the elections and faults where that exceeded Bound.
	OverBound int
}

// ElectionReport sums up one election.
type ElectionReport struct {
	Name string
	// Terms is how many terms started while faults were injected.
	Terms int
	// HolderChanges counts terms whose holder (process) differs from the
	// previous term's.
	HolderChanges int
	// WorstGap is the longest stretch without a leader, wherever it fell.
	WorstGap    time.Duration
	Overlaps    int
	OverlapTime time.Duration
}

// Passed reports whether every check passed.
func (r *Report) Passed() bool { return len(r.Failures()) == 0 }

// Failures lists every failed check, one line each.
func (r *Report) Failures() []string {
	var out []string
	for _, o := range r.Overlaps {
		out = append(out, fmt.Sprintf("safety: %s and %s both led %s for %v", o.A, o.B, o.Election, o.Duration))
	}
	for _, s := range r.Liveness {
		out = append(out, "liveness: "+s)
	}
	for _, s := range r.Thrash {
		out = append(out, "thrash: "+s)
	}
	for _, s := range r.Lost {
		out = append(out, "data: "+s)
	}
	for _, s := range r.Crashes {
		out = append(out, "crash: "+s)
	}
	for _, s := range r.InjectErrs {
		out = append(out, "fault: "+s)
	}
	return out
}

func round(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	return d.Round(10 * time.Millisecond).String()
}

// Print writes the report as tables followed by a verdict per check.
func (r *Report) Print(w io.Writer) {
	lease, renew, retry := Timing(r.TTL)
	fmt.Fprintf(w, "seed %d: %d faults in %v; %d instances: %s\n", r.Seed, len(r.Faults), r.Duration.Round(time.Second),
		len(r.Instances), strings.Join(r.Instances, ", "))
	bound := fmt.Sprintf("lease + %.1f x retry + slack", 1+elector.JitterFactor)
	if r.Mode != "" && r.Mode != "racing" {
		bound = fmt.Sprintf("2 x lease + %.1f x retry + slack: election mode %s", 1+elector.JitterFactor, r.Mode)
	}
	sessions := ""
	if r.Sessions {
		sessions = "; sessions on"
	}
	fmt.Fprintf(w, "ttl %v: lease %v, renew deadline %v, retry period %v; liveness bound %v (%s)%s\n\n",
		r.TTL, lease, renew, retry, r.Bound, bound, sessions)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fault\tinjected\tlongest gap\twithout leader after reference\tover bound\t")
	total, over := 0, 0
	var worstGap time.Duration
	for _, k := range r.Kinds {
		if k.Injected == 0 {
			continue
		}
		total += k.Injected
		over += k.OverBound
		worstGap = max(worstGap, k.WorstGap)
		ref := "injection"
		if k.Kind.healReferenced() {
			ref = "heal"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s (%s)\t%d\t\n", k.Kind, k.Injected, round(k.WorstGap), round(k.WorstNoLeader), ref, k.OverBound)
	}
	fmt.Fprintf(tw, "all\t%d\t%s\t%s\t%d\t\n", total, round(worstGap), round(r.WorstNoLeader), over)
	tw.Flush()
	fmt.Fprintln(w)

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "election\tterms\tholder changes\tworst gap\toverlaps\t")
	for _, e := range r.Elections {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d (%s)\t\n", e.Name, e.Terms, e.HolderChanges, round(e.WorstGap), e.Overlaps, round(e.OverlapTime))
	}
	tw.Flush()
	fmt.Fprintln(w)

	verdict := func(name string, failures []string, ok string) {
		if len(failures) == 0 {
			fmt.Fprintf(w, "%-9s PASS  %s\n", name, ok)
			return
		}
		fmt.Fprintf(w, "%-9s FAIL\n", name)
		for _, f := range failures {
			fmt.Fprintf(w, "          %s\n", f)
		}
	}
	var overlaps []string
	for _, o := range r.Overlaps {
		overlaps = append(overlaps, fmt.Sprintf("%s and %s both led %s for %v", o.A, o.B, o.Election, o.Duration))
	}
	verdict("safety", overlaps, "no two holders of one election ran at once (ledger of every process)")
	verdict("liveness", r.Liveness, fmt.Sprintf("every election led again within %v of every fault (worst %s)", r.Bound, round(r.WorstNoLeader)))
	terms := 0
	for _, e := range r.Elections {
		terms += e.Terms
	}
	verdict("thrash", r.Thrash, fmt.Sprintf("%d terms in %d elections for %d faults (%.1f per fault)", terms, len(r.Elections), len(r.Faults), r.TermsPerFault))
	verdict("data", r.Lost, "seeded labels, annotations and data keys of the locks, meshd-status, meshd-revision-* and istio-ca-root-cert kept; certificates current")
	verdict("crashes", r.Crashes, "no meshd process exited unless told to")
	verdict("faults", r.InjectErrs, "every fault injected as planned")
	if len(r.Unclean) > 0 {
		fmt.Fprintf(w, "note: not a clean exit after the final SIGTERM: %s\n", strings.Join(r.Unclean, "; "))
	}
}

// analysisInput is everything analyse needs from a run.
type analysisInput struct {
	cfg                              Config
	locks                            []lockRef
	instances                        []string
	intervals                        []Interval
	faults                           []FaultRecord
	started, faultsFrom, faultsUntil Mono
	lost, crashes, unclean           []string
}

// thrashPerFault bounds the terms one fault may start in one election: the
// old leader's term ends, another starts, and a higher-priority instance
// may take it back (plus the term of an instance that was restarted).
const thrashPerFault = 3

// analyse turns the ledgers and the fault records into a Report.
func analyse(in analysisInput) *Report {
	bound := in.cfg.bound()
	r := &Report{
		Seed: in.cfg.Seed, Instances: in.instances, TTL: in.cfg.TTL, Bound: bound, Mode: in.cfg.ElectionMode, Sessions: in.cfg.Sessions,
		Duration: in.faultsUntil.Sub(in.faultsFrom), Faults: in.faults,
		Overlaps: Overlaps(in.intervals), Lost: in.lost, Crashes: in.crashes, Unclean: in.unclean,
	}
	kinds := map[Kind]*KindReport{}
	for _, k := range KnownKinds() {
		kinds[k] = &KindReport{Kind: k}
	}
	for _, f := range in.faults {
		kinds[f.Fault.Kind].Injected++
		if f.Err != nil {
			r.InjectErrs = append(r.InjectErrs, fmt.Sprintf("#%d %s: %v", f.N, f.Fault.Kind, f.Err))
		}
	}
	at := func(m Mono) string { return fmt.Sprintf("t+%s", round(m.Sub(in.started))) }

	totalTerms := 0
	for _, l := range in.locks {
		e := ElectionReport{Name: l.name}
		var terms []Interval
		for _, iv := range in.intervals {
			if iv.Election == l.name {
				terms = append(terms, iv)
			}
		}
		if len(terms) == 0 || terms[0].Start.Sub(in.started) > time.Minute {
			r.Liveness = append(r.Liveness, fmt.Sprintf("%s: no leader within a minute of the start", l.name))
		}
		prev := ""
		for _, iv := range terms {
			if iv.Start >= in.faultsFrom && iv.Start <= in.faultsUntil {
				e.Terms++
				if prev != "" && iv.Holder != prev {
					e.HolderChanges++
				}
			}
			prev = iv.Holder
		}
		totalTerms += e.Terms
		if limit := thrashPerFault*len(in.faults) + 2; e.Terms > limit {
			r.Thrash = append(r.Thrash, fmt.Sprintf("%s: %d terms for %d faults (limit %d)", l.name, e.Terms, len(in.faults), limit))
		}
		for _, o := range r.Overlaps {
			if o.Election == l.name {
				e.Overlaps++
				e.OverlapTime += o.Duration
			}
		}
		for _, g := range Gaps(in.intervals, l.name, in.faultsUntil) {
			e.WorstGap = max(e.WorstGap, g.Duration())
			f := lastFaultBefore(in.faults, g.Start)
			ref, cause := g.Start, "no fault"
			if f != nil {
				ref, cause = max(g.Start, f.Ref), fmt.Sprintf("#%d %s", f.N, f.Fault.Kind)
			}
			without := max(g.End.Sub(ref), 0)
			if f != nil {
				k := kinds[f.Fault.Kind]
				k.WorstNoLeader = max(k.WorstNoLeader, without)
				k.WorstGap = max(k.WorstGap, g.Duration())
			}
			r.WorstNoLeader = max(r.WorstNoLeader, without)
			if without > bound {
				if f != nil {
					kinds[f.Fault.Kind].OverBound++
				}
				r.Liveness = append(r.Liveness, fmt.Sprintf("%s: no leader from %s to %s, %s after %s (bound %v)",
					l.name, at(g.Start), at(g.End), round(without), cause, bound))
			}
		}
		r.Elections = append(r.Elections, e)
	}
	if n := len(in.faults); n > 0 {
		r.TermsPerFault = float64(totalTerms) / float64(n)
	}
	for _, k := range KnownKinds() {
		r.Kinds = append(r.Kinds, *kinds[k])
	}
	return r
}

// lastFaultBefore returns the last fault injected at or before m.
func lastFaultBefore(faults []FaultRecord, m Mono) *FaultRecord {
	var last *FaultRecord
	for i := range faults {
		if faults[i].Start <= m {
			last = &faults[i]
		}
	}
	return last
}
