package bench

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/meshd-io/meshd/pkg/election"
)

func (r *Results) writeHandover(w io.Writer) {
	if len(r.Handover) == 0 {
		return
	}
	fmt.Fprintf(w, "## Handover after a graceful release\n\n")
	fmt.Fprintf(w, "Three candidates of one plain election, every one with ReleaseOnCancel. Measured from cancelling\n")
	fmt.Fprintf(w, "the leader to the start of the next leader's run function; a fresh Lease per trial.\n\n")
	writeHandoverTable(w, r.Handover)
	r.writeFloor(w)
}

// floorTarget is how many times the API server's floor a graceful handover
// may take, by the handover issue.
const floorTarget = 1.5

// writeFloor reports the API server's floor and meshd's handover against
// it.
func (r *Results) writeFloor(w io.Writer) {
	f := r.Floor
	if f == nil {
		return
	}
	fmt.Fprintf(w, "### The API server's floor\n\n")
	fmt.Fprintf(w, "What the API server itself allows a handover, measured in the same run, on a Lease of its own with\n")
	fmt.Fprintf(w, "no elector: one client updates it, a second client watches it and updates it as soon as the event\n")
	fmt.Fprintf(w, "arrives, as a follower taking a released lock does. Both are fresh clientsets without client-side\n")
	fmt.Fprintf(w, "rate limits, like every candidate's. %d samples are taken at random times in the pause before each of\n", floorSamples)
	fmt.Fprintf(w, "meshd's handover trials (while its three candidates run), so that both see the same load. The first\n")
	fmt.Fprintf(w, "UPDATE of a sample comes after a pause, as a graceful release does; a write that follows other\n")
	fmt.Fprintf(w, "requests at once is often faster (the second UPDATE of a sample; the last step of a priority handover).\n\n")
	t := newTable("floor", "median / p99", "samples")
	t.add("one UPDATE (round trip)", medP99(f.Update), trials(len(f.Update), f.Errors))
	t.add("one UPDATE seen through a watch (sent → event at the other client): the one-write floor", medP99(f.Watched), trials(len(f.Watched), f.Errors))
	t.add("an UPDATE, its watch event, the other client's UPDATE (sent → second answered): the release-then-acquire floor", medP99(f.Relay), trials(len(f.Relay), f.Errors))
	t.write(w)
	m, ok := takeoverFor(r.Handover, Meshd)
	if !ok {
		return
	}
	fmt.Fprintf(w, "meshd's graceful handovers above, against the floor that applies: the one-write floor when the\n")
	fmt.Fprintf(w, "releasing holder named its successor (the successor starts on the watch event alone), the\n")
	fmt.Fprintf(w, "release-then-acquire floor when it released the lock and the successor wrote (a trial counts as\n")
	fmt.Fprintf(w, "named when the successor's first successful UPDATE after the cancel returned after its run function\n")
	fmt.Fprintf(w, "started). In this plain election no candidate announces itself, so the releasing holder knows no\n")
	fmt.Fprintf(w, "successor and releases; two followers then race for the lock, and the loser's write is refused.\n")
	fmt.Fprintf(w, "When the steal section ran, its priority handovers are compared too, from the old leader's stop to\n")
	fmt.Fprintf(w, "the new leader's start: the holder, its work stopped, writes the record naming the candidate that\n")
	fmt.Fprintf(w, "asked, and the candidate starts on that record (the one-write floor).\n\n")
	t = newTable("handovers", "trials", "median / p99", "floor", "floor median", "median ÷ floor")
	t.right[3] = false
	for _, g := range floorGroups(m, r.Steal, f) {
		t.add(g.what, fmt.Sprint(len(g.lat)), medP99(g.lat), g.floor, fmtMS(medianOf(g.floorLat)), ratio(medianOf(g.lat), medianOf(g.floorLat)))
	}
	t.write(w)
}

// floorGroup is a set of handover trials and the floor that applies.
type floorGroup struct {
	what, floor   string
	lat, floorLat Durations
	// graceful: the trials are graceful handovers, which the Summary's
	// target is about.
	graceful bool
}

// floorGroups splits m's trials by the floor that applies; groups without
// trials are left out. steal, if it ran, adds meshd's priority handovers
// from the old leader's stop to the new leader's start: the holder names
// the candidate that asked, which starts on that record.
func floorGroups(m TakeoverResult, steal []StealResult, f *FloorResult) []floorGroup {
	var out []floorGroup
	if len(m.Named) > 0 {
		out = append(out, floorGroup{"graceful release, successor named by the releasing holder", "one-write", m.Named, f.Watched, true})
	}
	if len(m.Relayed) > 0 {
		out = append(out, floorGroup{"graceful release, the successor wrote", "release-then-acquire", m.Relayed, f.Relay, true})
	}
	if s, ok := stealFor(steal, Meshd); ok && len(s.Relay) > 0 {
		out = append(out, floorGroup{"priority handover on request, old leader's stop → new leader's start", "one-write", s.Relay, f.Watched, false})
	}
	return out
}

// floorRow is the Summary's target for the handover against the floor.
func floorRow(t *table, ttl time.Duration, rs []TakeoverResult, steal []StealResult, f *FloorResult) {
	m, ok := takeoverFor(rs, Meshd)
	if !ok || f == nil {
		return
	}
	var parts []string
	met := len(m.Latency) > 0
	for _, g := range floorGroups(m, steal, f) {
		if !g.graceful {
			continue
		}
		r := medianOf(g.lat) / medianOf(g.floorLat)
		parts = append(parts, fmt.Sprintf("%s: meshd %s, %s floor %s (%s, %d trials)", g.what, fmtMS(medianOf(g.lat)), g.floor,
			fmtMS(medianOf(g.floorLat)), ratio(medianOf(g.lat), medianOf(g.floorLat)), len(g.lat)))
		met = met && r <= floorTarget
	}
	t.add(fmt.Sprintf("ttl %v: graceful handover median within %.1fx of the API server's floor measured in this run", ttl, floorTarget),
		strings.Join(parts, "; "), verdict(met))
}

func writeHandoverTable(w io.Writer, rs []TakeoverResult) {
	base, _ := takeoverFor(rs, Meshd)
	t := newTable("implementation", "median / p99", "÷ meshd (median / p99)", "overlap", "trials")
	for _, x := range rs {
		t.add(string(x.Impl), medP99(x.Latency), ratioCells(medianOf(x.Latency), p99Of(x.Latency), medianOf(base.Latency), p99Of(base.Latency)),
			fmtOverlap(x.Overlap), trials(len(x.Latency), x.Errors))
	}
	t.write(w)
}

func trials(n int, errs []string) string {
	if len(errs) == 0 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d (%d failed)", n, len(errs))
}

func (r *Results) writeSteal(w io.Writer) {
	if len(r.Steal) == 0 {
		return
	}
	fmt.Fprintf(w, "## Steal after a default-revision change\n\n")
	fmt.Fprintf(w, "Two prioritized candidates on one Lease, revisions %q and %q, sharing a default-revision watcher.\n", revA, revB)
	fmt.Fprintf(w, "Each trial makes the follower's revision the default (so the lock moves back and forth) and measures\n")
	fmt.Fprintf(w, "from the change to the new leader's run function start, to the old leader's run function stop, and\n")
	fmt.Fprintf(w, "to the later of the two (the handover is complete). Ratios are of the complete handover.\n\n")
	writeStealTable(w, r.Steal)
	base, _ := stealFor(r.Steal, Meshd)
	if poll, ok := stealFor(r.Steal, MeshdPolling); ok {
		fmt.Fprintf(w, "Steal is compared against meshd-polling, since client-go cannot steal. meshd-polling's new leader\n")
		fmt.Fprintf(w, "starts %s (median) after the change (%s meshd's %s) because the change triggers an\n",
			fmtMS(medianOf(poll.Start)), ratio(medianOf(poll.Start), medianOf(base.Start)), fmtMS(medianOf(base.Start)))
		fmt.Fprintf(w, "attempt at once, but its old leader keeps running until its next renew fails: that is the overlap.\n\n")
	}
}

func writeStealTable(w io.Writer, rs []StealResult) {
	base, _ := stealFor(rs, Meshd)
	t := newTable("implementation", "new leader starts", "old leader stops", "complete", "÷ meshd (median / p99)", "overlap", "trials")
	for _, x := range rs {
		t.add(string(x.Impl), medP99(x.Start), medP99(x.Stop), medP99(x.Done),
			ratioCells(medianOf(x.Done), p99Of(x.Done), medianOf(base.Done), p99Of(base.Done)),
			fmtOverlap(x.Overlap), trials(len(x.Done), x.Errors))
	}
	t.add(string(ClientGo), "n/a (no priority support)", "n/a", "n/a", "n/a", "n/a", "0")
	t.write(w)
}

func (r *Results) writeRerun(w io.Writer) {
	d := r.LongTTL
	if d == nil {
		return
	}
	fmt.Fprintf(w, "## Handover and steal at ttl %v\n\n", d.Config.TTL)
	what := ""
	if d.Config.TTL == election.DefaultTTL {
		what = ", the default of meshd and istiod,"
	}
	fmt.Fprintf(w, "The same two scenarios at ttl %v (retry period %v)%s with %d trials per implementation.\n", d.Config.TTL, d.Config.retry(), what, d.Config.Trials)
	fmt.Fprintf(w, "A polling follower's wait grows with the retry period and meshd's does not, so the ratios grow\n")
	fmt.Fprintf(w, "about in proportion to the ttl. To keep the run short the implementations run at the same time, each\n")
	fmt.Fprintf(w, "on its own Leases; at this ttl the pollers send a request every few seconds, too few to disturb\n")
	fmt.Fprintf(w, "meshd's timings.\n\n")
	if len(d.Handover) > 0 {
		fmt.Fprintf(w, "**Handover after a graceful release:**\n\n")
		writeHandoverTable(w, d.Handover)
	}
	if len(d.Steal) > 0 {
		fmt.Fprintf(w, "**Steal after a default-revision change** (new leader start, old leader stop, the later of the two):\n\n")
		writeStealTable(w, d.Steal)
	}
}

func (r *Results) writeFailover(w io.Writer) {
	if len(r.Failover) == 0 {
		return
	}
	lease := r.Config.TTL
	fmt.Fprintf(w, "## Failover after a crash\n\n")
	fmt.Fprintf(w, "Three candidates of one plain election; the leader is cancelled without release (its Lease is left\n")
	fmt.Fprintf(w, "as a crashed process leaves it). \"crash → start\" is from the cancellation to the next leader's run\n")
	fmt.Fprintf(w, "function start; the next column subtracts LeaseDuration (%v). \"last renew → start − lease\" is from\n", lease)
	fmt.Fprintf(w, "the dead leader's last successful write to the next start, minus LeaseDuration: the time taken\n")
	fmt.Fprintf(w, "beyond the lease itself (it can be slightly negative: followers time the lease from when they saw\n")
	fmt.Fprintf(w, "the write).\n\n")
	base, _ := takeoverFor(r.Failover, Meshd)
	t := newTable("implementation", "crash → start", "crash → start − lease", "last renew → start − lease", "÷ meshd (median / p99)", "overlap", "trials")
	for _, x := range r.Failover {
		t.add(string(x.Impl), medP99(x.Latency), medP99(x.Latency.Shift(-lease)), medP99(x.SinceRenew.Shift(-lease)),
			ratioCells(medianOf(x.Latency), p99Of(x.Latency), medianOf(base.Latency), p99Of(base.Latency)),
			fmtOverlap(x.Overlap), trials(len(x.Latency), x.Errors))
	}
	t.write(w)
	for _, x := range r.Failover {
		if x.UnknownRenew > 0 {
			fmt.Fprintf(w, "\n%s: %d of %d trials have no \"last renew\" figure: the leader was cancelled with a renewal in\n", x.Impl, x.UnknownRenew, len(x.Latency))
			fmt.Fprintf(w, "flight, which the API server may have applied at a time the leader never learnt.\n")
		}
	}
}

// fmtCounts prints a per-minute breakdown like "15.0 (update 15.0)".
func fmtCounts(res RequestsResult, c Counts) string {
	total := res.PerMinute(c.Total())
	var parts []string
	for _, v := range Verbs {
		if n := c[v]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f", v, res.PerMinute(n)))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return fmt.Sprintf("%.1f (%s)", total, strings.Join(parts, ", "))
}

func (r *Results) writeRequests(w io.Writer) {
	if len(r.Requests) == 0 {
		return
	}
	fmt.Fprintf(w, "## API requests per election per minute\n\n")
	fmt.Fprintf(w, "One plain election with %d replicas (candidates with their own clientsets). After the leader is\n", RequestsReplicas)
	fmt.Fprintf(w, "seen by all and one more ttl has passed, requests are counted for %v and scaled to one minute.\n", r.RequestsWindow)
	fmt.Fprintf(w, "Lists and watches are counted when they are sent; a watch that stays open costs nothing more here.\n\n")
	base, _ := requestsFor(r.Requests, Meshd)
	t := newTable("implementation", "leader", "follower 1", "follower 2", "all replicas", "leader ÷ meshd", "followers ÷ meshd")
	for _, x := range r.Requests {
		if len(x.Errors) > 0 {
			t.add(string(x.Impl), "error: "+strings.Join(x.Errors, "; "))
			continue
		}
		row := []string{string(x.Impl), fmtCounts(x, x.Leader)}
		all, fol := x.Leader.Total(), 0
		for i := 0; i < RequestsReplicas-1; i++ {
			if i < len(x.Followers) {
				row = append(row, fmtCounts(x, x.Followers[i]))
				fol += x.Followers[i].Total()
			} else {
				row = append(row, "n/a")
			}
		}
		all += fol
		bfol := 0
		for _, f := range base.Followers {
			bfol += f.Total()
		}
		row = append(row, fmt.Sprintf("%.1f", x.PerMinute(all)),
			ratio(float64(x.Leader.Total()), float64(base.Leader.Total())),
			zeroRatio(float64(fol), float64(bfol)))
		t.add(row...)
	}
	t.write(w)
}

// zeroRatio is ratio, but says so when the base is zero.
func zeroRatio(a, b float64) string {
	if b == 0 && a > 0 {
		return "∞ (meshd: 0)"
	}
	if b == 0 && a == 0 {
		return "both 0"
	}
	return ratio(a, b)
}

func (r *Results) writeForced(w io.Writer) {
	if len(r.Forced) == 0 {
		return
	}
	fmt.Fprintf(w, "### Forced steal from a holder that does not cooperate\n\n")
	fmt.Fprintf(w, "The holder is client-go's own elector on a Lease: it writes no holder key, which the default\n")
	fmt.Fprintf(w, "revision outranks by the steal rule, and knows nothing of the handover protocol, so the candidate\n")
	fmt.Fprintf(w, "takes the lock by force and the holder learns of it only at its next renew; client-go then keeps its\n")
	fmt.Fprintf(w, "work running until its renew deadline. Each trial uses a fresh Lease: client-go's elector leads, a\n")
	fmt.Fprintf(w, "candidate of revision %q follows while %q is the default, then the default becomes %q.\n", revA, revB, revA)
	fmt.Fprintf(w, "Measured from that change to the return of the candidate's write that took the lock, to its run\n")
	fmt.Fprintf(w, "function start, and to the holder's run function stop. meshd (its defaults) starts its work at the\n")
	fmt.Fprintf(w, "fence: the holder's last renew as it observed it plus the holder's lease (%v), by which any holder\n", r.Config.TTL)
	fmt.Fprintf(w, "whose renew deadline is shorter than its lease has stopped. meshd-polling starts at once, as istiod's\n")
	fmt.Fprintf(w, "elector does: its overlap is what a forced steal costs without the fence.\n\n")
	t := newTable("candidate", "its work starts", "lock taken", "candidate's work starts", "holder's work stops", "overlap", "trials")
	t.right[1] = false
	for _, x := range r.Forced {
		rule := "at the fence"
		if x.Impl == MeshdPolling {
			rule = "at once (as istiod)"
		}
		t.add(string(x.Impl), rule, medP99(x.Write), medP99(x.Start), medP99(x.Stop), fmtOverlap(x.Overlap), trials(len(x.Start), x.Errors))
	}
	t.write(w)
}

// forcedRow is the Summary's target for forced steals: meshd's fenced start
// never overlaps the work of a holder that does not cooperate.
func forcedRow(t *table, ttl time.Duration, rs []ForcedResult) {
	m, ok := forcedFor(rs, Meshd)
	if !ok {
		return
	}
	got := fmt.Sprintf("meshd: %d steals, %s", len(m.Start), fmtOverlap(m.Overlap))
	if p, ok := forcedFor(rs, MeshdPolling); ok {
		got += fmt.Sprintf("; meshd-polling (starts at once, as istiod): %d steals, %s", len(p.Start), fmtOverlap(p.Overlap))
	}
	t.add(fmt.Sprintf("ttl %v: forced steal from a holder that does not cooperate (client-go's elector): 0 ms overlap", ttl), got,
		verdict(len(m.Start) > 0 && m.Overlap.Pairs == 0))
}

func forcedFor(rs []ForcedResult, impl Impl) (ForcedResult, bool) {
	for _, x := range rs {
		if x.Impl == impl {
			return x, true
		}
	}
	return ForcedResult{}, false
}
