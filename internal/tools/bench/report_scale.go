package bench

import (
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/meshd-io/meshd/pkg/features"
)

// metric is one column of the scale tables.
type metric struct {
	name, unit string
	get        func(ScaleResult) float64
	format     string
}

var scaleMetrics = []metric{
	{"API request rate, all replicas", "req/s", ScaleResult.ReqPerSec, "%.1f"},
	{"CPU per replica process, mean over replicas", "% of a core", ScaleResult.CPUPercent, "%.2f"},
	{"peak RSS of the largest replica process", "MiB", ScaleResult.PeakRSSMiB, "%.1f"},
	{"settle: time until every replica knows every election's leader", "ms", ScaleResult.Settle, "%.0f"},
	{"goroutines added per election, largest replica", "goroutines", ScaleResult.GoroutinesPerElection, "%.1f"},
	{"API server errors (5xx or no response) over the whole run, all replicas", "requests", ScaleResult.ServerErrors, "%.0f"},
}

func (r *Results) writeScale(w io.Writer) {
	sw := r.Scale
	if sw == nil {
		return
	}
	fmt.Fprintf(w, "## Scale\n\n")
	fmt.Fprintf(w, "Replicas are separate processes (the benchmark re-executes itself with -replica), each a candidate\n")
	fmt.Fprintf(w, "in every election of the cell through one shared, counted clientset, as one control-plane process\n")
	what := ""
	if r.ScaleTTL == features.LeaderElectionTTL.Default() {
		what = ", the default of meshd and istiod"
	}
	fmt.Fprintf(w, "would be. This section uses ttl %v (retry period %v)%s: at the %v of the latency\n", r.ScaleTTL, r.ScaleTTL/4, what, r.Config.TTL)
	fmt.Fprintf(w, "sections, 1000 polling elections x 3 replicas would ask a 2-core machine that also runs the API\n")
	fmt.Fprintf(w, "server and etcd for thousands of requests per second.\n\n")
	fmt.Fprintf(w, "A replica starts its elections spread evenly over %v (so that they do not renew in lock-step). The\n", StartSpread)
	fmt.Fprintf(w, "settle time is the longest any election took, from its own start, until the replica knew its leader,\n")
	fmt.Fprintf(w, "over all replicas. Once every replica has settled and %v more have passed, requests (counted as they\n", r.ScalePause)
	fmt.Fprintf(w, "leave each replica) and CPU (getrusage, user + system) are measured over %v, a whole number of\n", r.ScaleWindow)
	fmt.Fprintf(w, "retry periods, so every leader renews the same number of times whatever its phase. The CPU column is\n")
	fmt.Fprintf(w, "the mean over the replicas; RSS is the largest peak (VmHWM) of any replica.\n\n")
	fmt.Fprintf(w, "meshd's elections are prioritized, as NewLeaseLeaderElection builds them by default, so each also\n")
	fmt.Fprintf(w, "follows the default revision (through the process's shared watcher). Goroutines per election are\n")
	fmt.Fprintf(w, "those the elections added to a replica once settled (including the benchmark's own goroutine per\n")
	fmt.Fprintf(w, "election and the work of each leader); API server errors are 5xx responses and requests left\n")
	fmt.Fprintf(w, "unanswered, from a replica's start to its stop.\n\n")
	r.writeSweep(w, "elections", fmt.Sprintf("at %d replicas", sw.AtReplicas), sw.ByElections, func(c Cell) int { return c.Elections })
	r.writeSweep(w, "replicas", fmt.Sprintf("at %d elections", sw.AtElections), sw.ByReplicas, func(c Cell) int { return c.Replicas })
	r.writeGrowth(w, sw)
}

func (r *Results) writeSweep(w io.Writer, axis, fixed string, rs []ScaleResult, x func(Cell) int) {
	if len(rs) == 0 {
		return
	}
	find := func(p int, impl Impl) (ScaleResult, bool) {
		for _, res := range rs {
			if x(res.Cell) == p && res.Impl == impl {
				return res, true
			}
		}
		return ScaleResult{}, false
	}
	for _, m := range scaleMetrics {
		fmt.Fprintf(w, "**%s (%s)**, by %s %s:\n\n", m.name, m.unit, axis, fixed)
		t := newTable(axis, string(Meshd), string(MeshdPolling), string(ClientGo), "client-go ÷ meshd", "polling ÷ meshd")
		for _, p := range scalePoints(rs, x) {
			row := []string{fmt.Sprint(p)}
			vals := map[Impl]float64{}
			for _, impl := range Impls {
				res, ok := find(p, impl)
				vals[impl] = math.NaN()
				switch {
				case !ok:
					row = append(row, "not run")
				case res.Err != "":
					row = append(row, "error")
				default:
					vals[impl] = m.get(res)
					row = append(row, fmtFloat(m.format, vals[impl]))
				}
			}
			row = append(row, ratio(vals[ClientGo], vals[Meshd]), ratio(vals[MeshdPolling], vals[Meshd]))
			t.add(row...)
		}
		t.write(w)
	}
	fmt.Fprintf(w, "**Request mix (req/s by verb, all replicas)**, by %s %s:\n\n", axis, fixed)
	t := newTable(axis, string(Meshd), string(MeshdPolling), string(ClientGo))
	t.right = []bool{false, false, false, false}
	for _, p := range scalePoints(rs, x) {
		row := []string{fmt.Sprint(p)}
		for _, impl := range Impls {
			res, ok := find(p, impl)
			switch {
			case !ok:
				row = append(row, "not run")
			case res.Err != "":
				row = append(row, "error")
			default:
				row = append(row, fmtMix(res.Mix()))
			}
		}
		t.add(row...)
	}
	t.write(w)
	for _, res := range rs {
		if res.Err != "" {
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
	fmt.Fprintln(w)
}

func fmtFloat(format string, v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf(format, v)
}

func scalePoints(rs []ScaleResult, x func(Cell) int) []int {
	seen := map[int]bool{}
	var out []int
	for _, r := range rs {
		if p := x(r.Cell); !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Ints(out)
	return out
}

// writeGrowth says how each metric grows from the first to the last point
// of each sweep: the factor, and the exponent k of value ~ n^k.
func (r *Results) writeGrowth(w io.Writer, sw *Sweeps) {
	fmt.Fprintf(w, "**Growth** from the smallest to the largest point of each sweep: the factor, and in brackets the\n")
	fmt.Fprintf(w, "exponent k in value ∝ n^k (1 = linear, 0 = flat; fixed start-up costs pull k below 1).\n\n")
	t := newTable("metric", "sweep", string(Meshd), string(MeshdPolling), string(ClientGo))
	t.right[1] = false
	sweeps := []struct {
		name string
		rs   []ScaleResult
		x    func(Cell) int
	}{
		{"elections", sw.ByElections, func(c Cell) int { return c.Elections }},
		{"replicas", sw.ByReplicas, func(c Cell) int { return c.Replicas }},
	}
	for _, m := range scaleMetrics {
		for _, s := range sweeps {
			pts := scalePoints(s.rs, s.x)
			if len(pts) < 2 {
				continue
			}
			lo, hi := pts[0], pts[len(pts)-1]
			row := []string{m.name, fmt.Sprintf("%s %d → %d", s.name, lo, hi)}
			for _, impl := range Impls {
				a, b := math.NaN(), math.NaN()
				for _, res := range s.rs {
					if res.Impl != impl {
						continue
					}
					switch s.x(res.Cell) {
					case lo:
						a = m.get(res)
					case hi:
						b = m.get(res)
					}
				}
				row = append(row, growth(a, b, lo, hi))
			}
			t.add(row...)
		}
	}
	t.write(w)
}

func growth(a, b float64, lo, hi int) string {
	if math.IsNaN(a) || math.IsNaN(b) || a <= 0 || b <= 0 {
		return "n/a"
	}
	k := math.Log(b/a) / math.Log(float64(hi)/float64(lo))
	return fmt.Sprintf("%s (k=%.2f)", ratio(b, a), k)
}
