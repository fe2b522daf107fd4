package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/meshd-io/meshd/pkg/election"
)

// DefaultScaleCells and DefaultScaleSkip are the scale matrix of "make
// bench": elections at 3 replicas up to 5000, and replicas at 100
// elections. meshd-polling costs what client-go costs (the same polling),
// so it is left out of the largest cell, where client-go already shows what
// polling costs.
const (
	DefaultScaleCells = "1x3,10x3,100x3,1000x3,5000x3,100x1,100x10"
	DefaultScaleSkip  = "meshd-polling@5000x3"
)

// ParseSkip parses a comma-separated list of "<impl>@<elections>x<replicas>".
func ParseSkip(s string) (map[Cell][]Impl, error) {
	out := map[Cell][]Impl{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, cell, ok := strings.Cut(f, "@")
		if !ok {
			return nil, fmt.Errorf("%q: want <implementation>@<elections>x<replicas>", f)
		}
		impl, err := ParseImpl(name)
		if err != nil {
			return nil, err
		}
		c, err := parseCell(cell)
		if err != nil {
			return nil, err
		}
		out[c] = append(out[c], impl)
	}
	return out, nil
}

// metric is one table of the scale section.
type metric struct {
	name, unit string
	get        func(ScaleResult) float64
	format     string
	// noGrowth leaves the metric out of the growth table (it should be
	// zero everywhere).
	noGrowth bool
}

var scaleMetrics = []metric{
	{"API request rate, all replicas", "req/s", ScaleResult.ReqPerSec, "%.1f", false},
	{"CPU per replica process, mean over replicas", "% of a core", ScaleResult.CPUPercent, "%.2f", false},
	{"peak RSS of the largest replica process", "MiB", ScaleResult.PeakRSSMiB, "%.1f", false},
	{"settle: time until every replica knows every election's leader", "ms", ScaleResult.Settle, "%.0f", false},
	{"new terms during the window, all replicas (must be 0)", "terms", ScaleResult.newTermsOrNaN, "%.0f", true},
	{"goroutines added per election, largest replica", "goroutines", ScaleResult.GoroutinesPerElection, "%.1f", false},
	{"API server errors (5xx or no response) over the whole run, all replicas", "requests", ScaleResult.ServerErrors, "%.0f", true},
}

func (r ScaleResult) newTermsOrNaN() float64 { return r.orNaN(float64(r.NewTerms())) }

// scaleLine is one sweep through the matrix: cells that differ in one
// axis only.
type scaleLine struct {
	axis, fixed string
	cells       []Cell // ordered by x
	x           func(Cell) int
}

func byElections(c Cell) int { return c.Elections }
func byReplicas(c Cell) int  { return c.Replicas }

// lines groups the cells into sweeps: elections at each replica count and
// replicas at each election count that has two or more cells; a cell on no
// such sweep gets a line of its own by elections.
func (m *ScaleMatrix) lines() []scaleLine {
	cells := m.RunOrder()
	group := func(key func(Cell) int) ([]int, map[int][]Cell) {
		g := map[int][]Cell{}
		var keys []int
		for _, c := range cells {
			if _, ok := g[key(c)]; !ok {
				keys = append(keys, key(c))
			}
			g[key(c)] = append(g[key(c)], c)
		}
		sort.Ints(keys)
		return keys, g
	}
	sortBy := func(cs []Cell, x func(Cell) int) []Cell {
		sort.SliceStable(cs, func(i, j int) bool { return x(cs[i]) < x(cs[j]) })
		return cs
	}
	covered := map[Cell]bool{}
	var out []scaleLine
	add := func(l scaleLine) {
		for _, c := range l.cells {
			covered[c] = true
		}
		out = append(out, l)
	}
	rKeys, byR := group(byReplicas)
	for _, n := range rKeys {
		if len(byR[n]) >= 2 {
			add(scaleLine{"elections", fmt.Sprintf("at %d replicas", n), sortBy(byR[n], byElections), byElections})
		}
	}
	eKeys, byE := group(byElections)
	for _, n := range eKeys {
		if len(byE[n]) >= 2 {
			add(scaleLine{"replicas", fmt.Sprintf("at %d elections", n), sortBy(byE[n], byReplicas), byReplicas})
		}
	}
	for _, n := range rKeys {
		var rest []Cell
		for _, c := range byR[n] {
			if !covered[c] {
				rest = append(rest, c)
			}
		}
		if len(rest) > 0 {
			add(scaleLine{"elections", fmt.Sprintf("at %d replicas", n), sortBy(rest, byElections), byElections})
		}
	}
	return out
}

// columns are the implementations in the results, in table order.
func (m *ScaleMatrix) columns() []Impl {
	var out []Impl
	for _, impl := range Impls {
		for _, r := range m.Results {
			if r.Impl == impl {
				out = append(out, impl)
				break
			}
		}
	}
	return out
}

func hasImpl(impls []Impl, impl Impl) bool {
	for _, i := range impls {
		if i == impl {
			return true
		}
	}
	return false
}

// ratioColumn is a "a ÷ b" column of the metric tables.
type ratioColumn struct{ num, den Impl }

func (c ratioColumn) head() string {
	num := string(c.num)
	if c.num == MeshdPolling {
		num = "polling"
	}
	return num + " ÷ " + string(c.den)
}

func ratioColumns(cols []Impl) []ratioColumn {
	var out []ratioColumn
	for _, den := range []Impl{Meshd, MeshdSession} {
		if hasImpl(cols, den) && hasImpl(cols, ClientGo) {
			out = append(out, ratioColumn{ClientGo, den})
		}
	}
	if hasImpl(cols, Meshd) && hasImpl(cols, MeshdPolling) {
		out = append(out, ratioColumn{MeshdPolling, Meshd})
	}
	return out
}

// scaleCell is what a table shows for impl at cell when there is no
// figure, and ok when there is one.
func (m *ScaleMatrix) scaleCell(impl Impl, cell Cell) (res ScaleResult, text string, ok bool) {
	res, found := m.Result(impl, cell)
	switch {
	case !found && m.Skipped(impl, cell):
		return res, "skipped", false
	case !found:
		return res, "not run", false
	case res.NotSettled():
		return res, fmt.Sprintf("not settled in %v", ScaleSettleTimeout), false
	case res.Err != "":
		return res, "error", false
	}
	return res, "", true
}

func (r *Results) writeScale(w io.Writer) {
	m := r.Scale
	if m == nil {
		return
	}
	cols := m.columns()
	fmt.Fprintf(w, "## Scale\n\n")
	r.writeScaleSetup(w, cols)
	for _, l := range m.lines() {
		r.writeLine(w, l, cols)
	}
	r.writeGrowth(w, cols)
}

// describe lists the cells in run order, the implementations and the
// skipped ones, like "1x3, 1000x3; meshd, client-go; skipped: ...".
func (m *ScaleMatrix) describe() string {
	cols := m.columns()
	var cells []string
	for _, c := range m.RunOrder() {
		cells = append(cells, c.Short())
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = string(c)
	}
	out := fmt.Sprintf("%s, in this order; implementations %s", strings.Join(cells, ", "), strings.Join(names, ", "))
	var skips []string
	for _, c := range m.RunOrder() {
		for _, impl := range m.Skip[c] {
			if hasImpl(cols, impl) {
				skips = append(skips, fmt.Sprintf("%s at %s", impl, c.Short()))
			}
		}
	}
	if len(skips) > 0 {
		out += ", each in every cell except " + strings.Join(skips, ", ")
	}
	return out
}

func (r *Results) writeScaleSetup(w io.Writer, cols []Impl) {
	fmt.Fprintf(w, "Cells (elections x replicas): %s.\n", r.Scale.describe())
	if r.ScaleDefaults {
		fmt.Fprintf(w, "The replica sweep is at 100 elections rather than 1000: at 1000, ten polling replicas would send\n")
		fmt.Fprintf(w, "close to 900 requests per second from ten processes of over 100 MiB each, beside the API server and\n")
		fmt.Fprintf(w, "etcd on the same 2 cores. At 100 the sweep stays well inside what this machine serves, so it shows how\n")
		fmt.Fprintf(w, "cost grows with replicas rather than saturation, and the whole benchmark stays near half an hour; the\n")
		fmt.Fprintf(w, "targets at 1000 elections are checked at 3 replicas. meshd-polling polls as client-go does, so it is\n")
		fmt.Fprintf(w, "left out of the 5000-election cell, where client-go already shows what polling costs at that size.\n")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Replicas are separate processes (the benchmark re-executes itself with -replica), each a candidate\n")
	fmt.Fprintf(w, "in every election of the cell through one shared, counted clientset, as one control-plane process\n")
	what := ""
	if r.ScaleTTL == election.DefaultTTL {
		what = ", the default of meshd and istiod"
	}
	fmt.Fprintf(w, "would be. This section uses ttl %v (retry period %v)%s: at the %v of the latency\n", r.ScaleTTL, r.ScaleTTL/4, what, r.Config.TTL)
	fmt.Fprintf(w, "sections, 1000 polling elections x 3 replicas would ask a 2-core machine that also runs the API\n")
	fmt.Fprintf(w, "server and etcd for thousands of requests per second.\n\n")
	if hasImpl(cols, MeshdSession) {
		fmt.Fprintf(w, "meshd-session is meshd with its defaults plus `WithSessions(true)`: each replica renews one heartbeat\n")
		fmt.Fprintf(w, "Lease (its session, named after its identity) every retry period, and the records of the elections it\n")
		fmt.Fprintf(w, "leads are not rewritten while that session lives. It runs in this section only.\n\n")
	}
	fmt.Fprintf(w, "The replicas of a cell are started together, and each starts all its elections at once, spread evenly\n")
	fmt.Fprintf(w, "over %v (so that they do not renew in lock-step). The settle time is the longest any election took,\n", StartSpread)
	fmt.Fprintf(w, "from its own start, until the replica knew its leader, over all replicas; a replica that has not\n")
	fmt.Fprintf(w, "settled after %v gives up and the cell shows \"not settled\". Once every replica has settled and\n", ScaleSettleTimeout)
	fmt.Fprintf(w, "%v more have passed, requests (counted as they leave each replica) and CPU (getrusage, user +\n", r.ScalePause)
	fmt.Fprintf(w, "system) are measured over a window of %v, a whole number of retry periods, so every leader renews\n", r.ScaleWindow)
	fmt.Fprintf(w, "the same number of times whatever its phase. The CPU column is the mean over the replicas; RSS is the\n")
	fmt.Fprintf(w, "largest peak (VmHWM) of any replica. Each replica also counts its requests by the Lease they name:\n")
	fmt.Fprintf(w, "those to the Leases of elections it leads at the end of the window (leaders), to those of elections\n")
	fmt.Fprintf(w, "it follows (followers), and the rest (watches, lists, a session's heartbeat).\n\n")
	fmt.Fprintf(w, "meshd's elections are prioritized, as NewLeaseLeaderElection builds them by default, so each also\n")
	fmt.Fprintf(w, "follows the default revision (through the process's shared watcher). Goroutines per election are\n")
	fmt.Fprintf(w, "those the elections added to a replica once settled (including the benchmark's own goroutine per\n")
	fmt.Fprintf(w, "election and the work of each leader); API server errors are 5xx responses and requests left\n")
	fmt.Fprintf(w, "unanswered, from a replica's start to its stop.\n\n")
}

func (r *Results) writeLine(w io.Writer, l scaleLine, cols []Impl) {
	m := r.Scale
	rcols := ratioColumns(cols)
	head := []string{l.axis}
	for _, c := range cols {
		head = append(head, string(c))
	}
	for _, rc := range rcols {
		head = append(head, rc.head())
	}
	for _, mt := range scaleMetrics {
		fmt.Fprintf(w, "**%s (%s)**, by %s %s:\n\n", mt.name, mt.unit, l.axis, l.fixed)
		t := newTable(head...)
		for _, cell := range l.cells {
			row := []string{fmt.Sprint(l.x(cell))}
			vals := map[Impl]float64{}
			for _, impl := range cols {
				res, text, ok := m.scaleCell(impl, cell)
				vals[impl] = math.NaN()
				if ok {
					vals[impl] = mt.get(res)
					text = fmtFloat(mt.format, vals[impl])
				}
				row = append(row, text)
			}
			for _, rc := range rcols {
				row = append(row, ratio(vals[rc.num], vals[rc.den]))
			}
			t.add(row...)
		}
		t.write(w)
	}
	r.writeMix(w, l, cols, "Request mix (req/s by verb, all replicas)", func(res ScaleResult) string { return fmtMix(res.Mix()) })
	r.writeMix(w, l, cols, "Requests in the window by sender (req/s, all replicas: leaders / followers / other)", fmtSenders)
	for _, cell := range l.cells {
		for _, impl := range cols {
			res, ok := m.Result(impl, cell)
			if !ok {
				continue
			}
			switch {
			case res.NotSettled():
				fmt.Fprintf(w, "- %s at %v did not settle in %v: %d elections had no known leader in %d of %d replicas (peak RSS then %.1f MiB).\n",
					res.Impl, res.Cell, ScaleSettleTimeout, res.Unsettled, res.UnsettledReplicas, res.Cell.Replicas, float64(res.UnsettledRSSKiB)/1024)
				continue
			case res.Err != "":
				fmt.Fprintf(w, "- %s at %v failed: %s\n", res.Impl, res.Cell, res.Err)
				continue
			}
			if res.Leaders() != res.Cell.Elections {
				fmt.Fprintf(w, "- %s at %v: %d of %d elections had a leader at the end of the window.\n", res.Impl, res.Cell, res.Leaders(), res.Cell.Elections)
			}
			if n := res.NewTerms(); n > 0 {
				fmt.Fprintf(w, "- %s at %v: %d terms began during the window, so it was not a steady state: leaders lost their terms and the elections were contended again (run with -replica-logs DIR to see why).\n", res.Impl, res.Cell, n)
			}
		}
	}
	fmt.Fprintln(w)
}

// writeMix writes a table of text cells, one per implementation.
func (r *Results) writeMix(w io.Writer, l scaleLine, cols []Impl, title string, cell func(ScaleResult) string) {
	fmt.Fprintf(w, "**%s**, by %s %s:\n\n", title, l.axis, l.fixed)
	head := []string{l.axis}
	for _, c := range cols {
		head = append(head, string(c))
	}
	t := newTable(head...)
	for i := range t.right {
		t.right[i] = false
	}
	for _, c := range l.cells {
		row := []string{fmt.Sprint(l.x(c))}
		for _, impl := range cols {
			res, text, ok := r.Scale.scaleCell(impl, c)
			if ok {
				text = cell(res)
			}
			row = append(row, text)
		}
		t.add(row...)
	}
	t.write(w)
}

// fmtSenders prints the window's request rates by sender, like
// "133.3 / 0 / 0.1".
func fmtSenders(res ScaleResult) string {
	sec := res.WindowSeconds()
	f := func(c Counts) string {
		if c.Total() == 0 {
			return "0"
		}
		v := float64(c.Total()) / sec
		if v < 1 {
			return fmt.Sprintf("%.2f", v)
		}
		return fmt.Sprintf("%.1f", v)
	}
	return f(res.LeaderRequests()) + " / " + f(res.FollowerRequests()) + " / " + f(res.OtherRequests())
}

func fmtFloat(format string, v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf(format, v)
}

// writeGrowth says how each metric grows from the first to the last point
// of each sweep: the factor, and the exponent k of value ~ n^k.
func (r *Results) writeGrowth(w io.Writer, cols []Impl) {
	var lines []scaleLine
	for _, l := range r.Scale.lines() {
		if len(l.cells) >= 2 {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "**Growth** from the smallest to the largest point of each sweep: the factor, and in brackets the\n")
	fmt.Fprintf(w, "exponent k in value ∝ n^k (1 = linear, 0 = flat; fixed start-up costs pull k below 1). For an\n")
	fmt.Fprintf(w, "implementation without a figure at an end of the sweep, the growth is between the points that have one,\n")
	fmt.Fprintf(w, "named in the cell (\"1 → 1000\").\n\n")
	head := []string{"metric", "sweep"}
	for _, c := range cols {
		head = append(head, string(c))
	}
	t := newTable(head...)
	t.right[1] = false
	for _, mt := range scaleMetrics {
		if mt.noGrowth {
			continue
		}
		for _, l := range lines {
			lo, hi := l.cells[0], l.cells[len(l.cells)-1]
			row := []string{mt.name, fmt.Sprintf("%s %d → %d %s", l.axis, l.x(lo), l.x(hi), l.fixed)}
			for _, impl := range cols {
				row = append(row, r.Scale.growthOf(mt, impl, l))
			}
			t.add(row...)
		}
	}
	t.write(w)
}

// growthOf is the growth of impl's metric along l, from the smallest to
// the largest point with a figure, naming those points when they are not
// the ends of l.
func (m *ScaleMatrix) growthOf(mt metric, impl Impl, l scaleLine) string {
	var xs []int
	var vs []float64
	for _, c := range l.cells {
		if res, _, ok := m.scaleCell(impl, c); ok {
			xs, vs = append(xs, l.x(c)), append(vs, mt.get(res))
		}
	}
	if len(xs) < 2 {
		return "n/a"
	}
	g := growth(vs[0], vs[len(vs)-1], xs[0], xs[len(xs)-1])
	if g != "n/a" && (xs[0] != l.x(l.cells[0]) || xs[len(xs)-1] != l.x(l.cells[len(l.cells)-1])) {
		g = fmt.Sprintf("%d → %d: %s", xs[0], xs[len(xs)-1], g)
	}
	return g
}

func growth(a, b float64, lo, hi int) string {
	if math.IsNaN(a) || math.IsNaN(b) || a <= 0 || b <= 0 {
		return "n/a"
	}
	k := math.Log(b/a) / math.Log(float64(hi)/float64(lo))
	if math.Abs(k) < 0.005 {
		k = 0 // no "-0.00"
	}
	return fmt.Sprintf("%s (k=%.2f)", ratio(b, a), k)
}

// The cells at which the summary checks the scale targets.
var (
	ScaleTargetCell = Cell{Elections: 1000, Replicas: 3}
	ScaleLargeCell  = Cell{Elections: 5000, Replicas: 3}
)

// Targets of the scale section, at ScaleTargetCell.
const (
	targetRSSMiB          = 64
	targetSettleMS        = 1000
	targetSessionReqPerS  = 1
	targetCPUShare        = 0.5
	targetGoroutinesPerEl = 3
)

// modeCheck is one meshd mode's figure and verdict for one target.
type modeCheck struct {
	impl Impl
	text string
	ok   bool
}

// addModeRow adds a summary row with one figure and one verdict per mode.
func addModeRow(t *table, target string, checks []modeCheck, extra ...string) {
	if len(checks) == 0 {
		return
	}
	var got, verdicts []string
	for _, c := range checks {
		got = append(got, fmt.Sprintf("%s %s", c.impl, c.text))
		verdicts = append(verdicts, fmt.Sprintf("%s: %s", c.impl, verdict(c.ok)))
	}
	got = append(got, extra...)
	v := verdict(checks[0].ok)
	if len(checks) > 1 {
		v = strings.Join(verdicts, "; ")
	}
	t.add(target, strings.Join(got, "; "), v)
}

// scaleModes are the meshd modes the scale targets are about, among those
// that ran.
func (m *ScaleMatrix) scaleModes() []Impl {
	var out []Impl
	for _, impl := range []Impl{Meshd, MeshdSession} {
		if hasImpl(m.columns(), impl) {
			out = append(out, impl)
		}
	}
	return out
}

// figure returns impl's result at cell and whether it has figures; when it
// has none, text says why.
func (m *ScaleMatrix) figure(impl Impl, cell Cell) (ScaleResult, string, bool) {
	res, text, ok := m.scaleCell(impl, cell)
	return res, text, ok && !math.IsNaN(res.ReqPerSec())
}

// writeScaleTargets adds the scale targets to the summary table: those at
// ScaleTargetCell when it ran, the steady state of every cell, and the
// completion of ScaleLargeCell when it ran.
func (r *Results) writeScaleTargets(t *table) {
	m := r.Scale
	if m == nil {
		return
	}
	modes := m.scaleModes()
	at := ScaleTargetCell
	cg, cgText, cgOK := m.figure(ClientGo, at)
	if !cgOK {
		cgText = "client-go " + cgText
	}
	prefix := fmt.Sprintf("scale %s, ttl %v: ", at.Short(), r.ScaleTTL)
	ran := false
	for _, impl := range modes {
		_, found := m.Result(impl, at)
		ran = ran || found
	}
	if ran {
		var rss, settle, cpu, start []modeCheck
		for _, impl := range modes {
			res, text, ok := m.figure(impl, at)
			if !ok {
				for _, s := range []*[]modeCheck{&rss, &settle, &cpu, &start} {
					*s = append(*s, modeCheck{impl, text, false})
				}
				continue
			}
			v := res.PeakRSSMiB()
			rss = append(rss, modeCheck{impl, fmt.Sprintf("%.1f MiB", v), v < targetRSSMiB && cgOK && v <= cg.PeakRSSMiB()})
			v = res.Settle()
			settle = append(settle, modeCheck{impl, fmt.Sprintf("%.0f ms", v), v < targetSettleMS})
			v = res.CPUPercent()
			cpu = append(cpu, modeCheck{impl, fmt.Sprintf("%.2f%% (%s client-go's)", v, ratioOrNA(v, cg.CPUPercent(), cgOK)),
				cgOK && v <= targetCPUShare*cg.CPUPercent()})
			e, g := res.ServerErrors(), res.GoroutinesPerElection()
			start = append(start, modeCheck{impl, fmt.Sprintf("%.0f errors, %.1f goroutines per election", e, g), e == 0 && g <= targetGoroutinesPerEl})
		}
		cgRSS, cgCPU := cgText, cgText
		if cgOK {
			cgRSS = fmt.Sprintf("client-go %.1f MiB", cg.PeakRSSMiB())
			cgCPU = fmt.Sprintf("client-go %.2f%%", cg.CPUPercent())
		}
		addModeRow(t, prefix+fmt.Sprintf("peak RSS per replica < %d MiB and at most client-go's", targetRSSMiB), rss, cgRSS)
		addModeRow(t, prefix+fmt.Sprintf("settle < %v ms (every replica knows every election's leader)", targetSettleMS), settle)
		addModeRow(t, prefix+"CPU per replica at most half of client-go's", cpu, cgCPU)
		addModeRow(t, prefix+fmt.Sprintf("replicas and elections started at once (within %v): 0 responses 5xx and at most %d goroutines per election", StartSpread, targetGoroutinesPerEl), start)
		if hasImpl(modes, MeshdSession) {
			res, text, ok := m.figure(MeshdSession, at)
			c := modeCheck{MeshdSession, text, false}
			if ok {
				v := res.ReqPerSec()
				c = modeCheck{MeshdSession, fmt.Sprintf("%.2f req/s (%s)", v, fmtMix(res.Mix())), v < targetSessionReqPerS}
			}
			addModeRow(t, prefix+fmt.Sprintf("session mode: under %d request per second, all %d replicas together", targetSessionReqPerS, at.Replicas), []modeCheck{c})
		}
	}
	if hasImpl(modes, Meshd) {
		r.perRecordRow(t)
	}
	var terms []modeCheck
	for _, impl := range modes {
		var bad []string
		cells := 0
		for _, res := range m.Results {
			if res.Impl != impl || res.Err != "" {
				continue
			}
			cells++
			if n := res.NewTerms(); n > 0 {
				bad = append(bad, fmt.Sprintf("%d at %s", n, res.Cell.Short()))
			}
		}
		text := "0 in " + nCells(cells)
		switch {
		case cells == 0:
			text = "no cell completed"
		case len(bad) > 0:
			text = strings.Join(bad, ", ")
		}
		terms = append(terms, modeCheck{impl, text, cells > 0 && len(bad) == 0})
	}
	addModeRow(t, "scale, every cell that settled: 0 new terms during the window", terms)
	r.largeCellRow(t, modes)
}

// nCells is "1 cell", "2 cells".
func nCells(n int) string {
	if n == 1 {
		return "1 cell"
	}
	return fmt.Sprintf("%d cells", n)
}

func ratioOrNA(v, base float64, ok bool) string {
	if !ok {
		return "n/a"
	}
	return ratio(v, base)
}

// perRecordRow checks meshd's per-record steady state in every cell: its
// followers send nothing and its leaders only update their records.
func (r *Results) perRecordRow(t *table) {
	m := r.Scale
	var bad []string
	detail := ""
	cells := 0
	for _, res := range m.Results {
		if res.Impl != Meshd || res.Err != "" {
			continue
		}
		cells++
		lead, follow, other := res.LeaderRequests(), res.FollowerRequests(), res.OtherRequests()
		if res.Cell == ScaleTargetCell {
			renews := math.Round(res.WindowSeconds() / (r.ScaleTTL / 4).Seconds())
			detail = fmt.Sprintf("at %s: leaders %s (%d elections x %.0f retry periods = %.0f), followers %s, other %s",
				res.Cell.Short(), fmtTotals(lead), res.Cell.Elections, renews, float64(res.Cell.Elections)*renews, fmtTotals(follow), fmtTotals(other))
		}
		if follow.Total() > 0 || other.Total() > 0 || lead.Total() != lead[VerbUpdate] {
			if res.Cell == ScaleTargetCell {
				bad = append(bad, res.Cell.Short())
			} else {
				bad = append(bad, fmt.Sprintf("%s (leaders %s, followers %s, other %s)", res.Cell.Short(), fmtTotals(lead), fmtTotals(follow), fmtTotals(other)))
			}
		}
	}
	if cells == 0 {
		return
	}
	got := []string{nCells(cells) + " measured"}
	if detail != "" {
		got = append(got, detail)
	}
	if len(bad) > 0 {
		got = append(got, "not only leaders' updates at "+strings.Join(bad, ", "))
	}
	t.add("scale, every cell: per-record mode (meshd) sends only leaders' updates in the window, followers 0 requests",
		strings.Join(got, "; "), verdict(len(bad) == 0))
}

// largeCellRow checks that ScaleLargeCell completed for every meshd mode:
// every replica settled, a window was measured and every election had a
// leader at its end.
func (r *Results) largeCellRow(t *table, modes []Impl) {
	m := r.Scale
	c := ScaleLargeCell
	ran := false
	for _, cell := range m.RunOrder() {
		ran = ran || cell == c
	}
	if !ran {
		return
	}
	var checks []modeCheck
	for _, impl := range modes {
		res, text, ok := m.figure(impl, c)
		if !ok {
			checks = append(checks, modeCheck{impl, text, false})
			continue
		}
		checks = append(checks, modeCheck{impl,
			fmt.Sprintf("settled in %.0f ms, %d of %d elections led at the end of the window, %.1f MiB, %.1f req/s",
				res.Settle(), res.Leaders(), c.Elections, res.PeakRSSMiB(), res.ReqPerSec()),
			res.Leaders() == c.Elections})
	}
	var extra []string
	if res, text, ok := m.figure(ClientGo, c); ok {
		extra = append(extra, fmt.Sprintf("client-go settled in %.0f ms, %d of %d led", res.Settle(), res.Leaders(), c.Elections))
	} else if text != "not run" {
		extra = append(extra, "client-go "+text)
	}
	addModeRow(t, fmt.Sprintf("scale %s completes, figures in the table", c.Short()), checks, extra...)
}
