package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ScaleSettleTimeout bounds how long a replica may take until every one of
// its elections has a known leader.
const ScaleSettleTimeout = 3 * time.Minute

// ScaleConfig configures the scale benchmark.
type ScaleConfig struct {
	TTL time.Duration
	// Pause is the wait after every replica has settled before the window.
	Pause time.Duration
	// Window is how long steady-state requests and CPU are measured.
	Window time.Duration
	// Kubeconfig reaches the API server from a replica.
	Kubeconfig string
	// LogDir, if set, receives one log file of meshd's elector logs per
	// replica, for diagnosis.
	LogDir string
	// ProfileDir, if set, receives one heap profile per replica, taken at
	// the end of the window.
	ProfileDir string
	// Executable re-executed as a replica; ReplicaArgs turns options into
	// its command line.
	Executable  string
	ReplicaArgs func(ReplicaOptions) []string
	// Impls to run, in order; default Impls.
	Impls []Impl
	Logf  func(format string, args ...any)
}

// Cell is one point of the scale matrix.
type Cell struct {
	Elections int
	Replicas  int
}

func (c Cell) String() string {
	return fmt.Sprintf("%d elections x %d replicas", c.Elections, c.Replicas)
}

// ParseCells parses a comma-separated list of cells written
// "<elections>x<replicas>", such as "1000x3,100x10".
func ParseCells(s string) ([]Cell, error) {
	var out []Cell
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		c, err := parseCell(f)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no cells in %q", s)
	}
	return out, nil
}

func parseCell(f string) (Cell, error) {
	e, r, ok := strings.Cut(strings.ToLower(f), "x")
	ne, err1 := strconv.Atoi(e)
	nr, err2 := strconv.Atoi(r)
	if !ok || err1 != nil || err2 != nil || ne < 1 || nr < 1 {
		return Cell{}, fmt.Errorf("cell %q: want <elections>x<replicas>, both positive integers, such as 1000x3", f)
	}
	return Cell{Elections: ne, Replicas: nr}, nil
}

// Short writes the cell as ParseCells reads it.
func (c Cell) Short() string { return fmt.Sprintf("%dx%d", c.Elections, c.Replicas) }

// ScaleResult is one implementation at one cell.
type ScaleResult struct {
	Impl     Impl
	Cell     Cell
	Replicas []ReplicaReport // the settled and result reports merged
	Err      string
	// Unsettled counts, when some replicas gave up waiting for their
	// elections to have a known leader (ScaleSettleTimeout), the elections
	// still without one, summed over those replicas; UnsettledReplicas is
	// how many replicas gave up, and UnsettledRSSKiB their largest peak RSS.
	Unsettled         int
	UnsettledReplicas int
	UnsettledRSSKiB   int64
}

// NotSettled reports whether the cell failed because elections had no
// known leader within ScaleSettleTimeout.
func (r ScaleResult) NotSettled() bool { return r.UnsettledReplicas > 0 }

// LeaderRequests, FollowerRequests and OtherRequests split the window's
// requests of all replicas: to the Leases of elections the sending replica
// led, to those of elections it followed, and requests naming no election's
// Lease (watches, lists, a session's heartbeat).
func (r ScaleResult) LeaderRequests() Counts {
	out := Counts{}
	for _, p := range r.Replicas {
		out.Add(p.LeaderRequests)
	}
	return out
}

// FollowerRequests: see LeaderRequests.
func (r ScaleResult) FollowerRequests() Counts {
	out := Counts{}
	for _, p := range r.Replicas {
		out.Add(p.FollowerRequests)
	}
	return out
}

// OtherRequests: see LeaderRequests.
func (r ScaleResult) OtherRequests() Counts {
	out := Counts{}
	for _, p := range r.Replicas {
		out.Add(p.Requests.Sub(p.LeaderRequests).Sub(p.FollowerRequests))
	}
	return out
}

// WindowSeconds is the longest window of any replica, in seconds (NaN
// when there is none).
func (r ScaleResult) WindowSeconds() float64 {
	m := 0.0
	for _, p := range r.Replicas {
		m = max(m, p.Window.Seconds())
	}
	if m == 0 {
		return math.NaN()
	}
	return r.orNaN(m)
}

// StartRequests are the requests all replicas sent until they settled,
// by verb.
func (r ScaleResult) StartRequests() Counts {
	out := Counts{}
	for _, p := range r.Replicas {
		out.Add(p.StartRequests)
	}
	return out
}

// fmtTotals prints request counts like "create 1000, update 3".
func fmtTotals(c Counts) string {
	var parts []string
	for _, v := range Verbs {
		if n := c[v]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", v, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// ReqPerSec is the request rate of all replicas together.
func (r ScaleResult) ReqPerSec() float64 {
	total := 0.0
	for _, p := range r.Replicas {
		if p.Window > 0 {
			total += float64(p.Requests.Total()) / p.Window.Seconds()
		}
	}
	return r.orNaN(total)
}

// Mix is the request rate of all replicas together by verb.
func (r ScaleResult) Mix() map[string]float64 {
	out := map[string]float64{}
	for _, p := range r.Replicas {
		if p.Window > 0 {
			for v, n := range p.Requests {
				out[v] += float64(n) / p.Window.Seconds()
			}
		}
	}
	return out
}

// fmtMix prints a request mix like "update 133.3, get 166.7".
func fmtMix(mix map[string]float64) string {
	var parts []string
	for _, v := range Verbs {
		if x := mix[v]; x > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f", v, x))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// CPUPercent is the mean CPU use per replica process, in % of one core.
func (r ScaleResult) CPUPercent() float64 {
	sum, n := 0.0, 0
	for _, p := range r.Replicas {
		if p.Window > 0 {
			sum += 100 * p.CPU.Seconds() / p.Window.Seconds()
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

// PeakRSSMiB is the largest peak RSS of any replica.
func (r ScaleResult) PeakRSSMiB() float64 {
	m := 0.0
	for _, p := range r.Replicas {
		m = max(m, float64(p.PeakRSSKiB)/1024)
	}
	return r.orNaN(m)
}

// Settle is the slowest replica's time until all its elections had a
// leader.
func (r ScaleResult) Settle() float64 {
	m := 0.0
	for _, p := range r.Replicas {
		m = max(m, ms(p.Settle))
	}
	return r.orNaN(m)
}

// NewTerms counts the terms that began during the window in all replicas.
func (r ScaleResult) NewTerms() int {
	n := 0
	for _, p := range r.Replicas {
		n += p.NewTerms
	}
	return n
}

// GoroutinesPerElection is the largest number of goroutines a replica's
// elections added, divided by the number of elections.
func (r ScaleResult) GoroutinesPerElection() float64 {
	m := 0
	for _, p := range r.Replicas {
		m = max(m, p.Goroutines)
	}
	return r.orNaN(float64(m) / float64(max(r.Cell.Elections, 1)))
}

// ServerErrors counts 5xx responses and requests without a response, over
// the whole run of every replica (start included).
func (r ScaleResult) ServerErrors() float64 {
	n := 0
	for _, p := range r.Replicas {
		n += p.ServerErrors
	}
	return r.orNaN(float64(n))
}

// Leaders counts the elections led at the end of the window (should equal
// the number of elections).
func (r ScaleResult) Leaders() int {
	n := 0
	for _, p := range r.Replicas {
		n += p.Leading
	}
	return n
}

func (r ScaleResult) orNaN(v float64) float64 {
	if r.Err != "" || len(r.Replicas) == 0 {
		return math.NaN()
	}
	return v
}

// RunScale runs one cell for one implementation: cell.Replicas processes,
// each a candidate in cell.Elections elections of namespace ns.
func RunScale(ctx context.Context, sc ScaleConfig, impl Impl, cell Cell, ns string) ScaleResult {
	res := ScaleResult{Impl: impl, Cell: cell}
	reps, err := runScale(ctx, sc, impl, cell, ns, &res)
	res.Replicas = reps
	if err != nil {
		res.Err = err.Error()
		if sc.Logf != nil {
			sc.Logf("  scale %s %v: %v", impl, cell, err)
		}
	}
	return res
}

// replicaProc is a running replica process.
type replicaProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan ReplicaReport
	stderr *limitedWriter
	done   chan struct{}
}

// runScale runs a cell; when replicas do not settle it counts how far they
// got in unsettled.
func runScale(ctx context.Context, sc ScaleConfig, impl Impl, cell Cell, ns string, unsettled *ScaleResult) ([]ReplicaReport, error) {
	procs := make([]*replicaProc, 0, cell.Replicas)
	defer func() {
		for _, p := range procs {
			p.kill()
		}
	}()
	for i := 0; i < cell.Replicas; i++ {
		p, err := startReplica(sc, ReplicaOptions{
			Impl: impl, Elections: cell.Elections, TTL: sc.TTL, Namespace: ns, Identity: "r" + strconv.Itoa(i),
			Kubeconfig: sc.Kubeconfig, LogFile: sc.logFile(impl, cell, i), RequestLog: sc.requestLog(impl, cell, i),
			HeapProfile: sc.heapProfile(impl, cell, i),
		})
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	reports := make([]ReplicaReport, len(procs))
	// Every replica is awaited, also after one failed: they settle at the
	// same time, and an unsettled cell reports how far each got.
	var failed error
	for i, p := range procs {
		r, err := p.await(ctx, EventSettled, ScaleSettleTimeout+30*time.Second)
		if err != nil {
			if r.Unsettled > 0 {
				unsettled.Unsettled += r.Unsettled
				unsettled.UnsettledReplicas++
				unsettled.UnsettledRSSKiB = max(unsettled.UnsettledRSSKiB, r.PeakRSSKiB)
			}
			if failed == nil {
				failed = fmt.Errorf("replica %d: %w", i, err)
			}
			continue
		}
		reports[i].Settle, reports[i].Goroutines, reports[i].StartRequests = r.Settle, r.Goroutines, r.StartRequests
	}
	if failed != nil {
		return nil, failed
	}
	if err := sleep(ctx, sc.Pause); err != nil {
		return nil, err
	}
	for _, p := range procs {
		fmt.Fprintln(p.stdin, cmdStart)
	}
	if err := sleep(ctx, sc.Window); err != nil {
		return nil, err
	}
	for _, p := range procs {
		fmt.Fprintln(p.stdin, cmdStop)
	}
	for i, p := range procs {
		r, err := p.await(ctx, EventResult, 30*time.Second)
		if err != nil {
			return nil, fmt.Errorf("replica %d: %w", i, err)
		}
		r.Settle, r.Goroutines, r.StartRequests = reports[i].Settle, reports[i].Goroutines, reports[i].StartRequests
		reports[i] = r
	}
	return reports, nil
}

func (sc ScaleConfig) logFile(impl Impl, cell Cell, replica int) string {
	return replicaFile(sc.LogDir, impl, cell, replica, ".log")
}

func (sc ScaleConfig) requestLog(impl Impl, cell Cell, replica int) string {
	return replicaFile(sc.LogDir, impl, cell, replica, ".requests")
}

func (sc ScaleConfig) heapProfile(impl Impl, cell Cell, replica int) string {
	return replicaFile(sc.ProfileDir, impl, cell, replica, ".heap")
}

// replicaFile names a file of one replica in dir; "" when dir is.
func replicaFile(dir string, impl Impl, cell Cell, replica int, ext string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, fmt.Sprintf("%s-%de-%dr-r%d%s", impl, cell.Elections, cell.Replicas, replica, ext))
}

func startReplica(sc ScaleConfig, o ReplicaOptions) (*replicaProc, error) {
	cmd := exec.Command(sc.Executable, sc.ReplicaArgs(o)...)
	cmd.SysProcAttr = childAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &replicaProc{cmd: cmd, stdin: stdin, lines: make(chan ReplicaReport, 4), done: make(chan struct{}),
		stderr: &limitedWriter{max: 64 << 10}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(p.lines)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			var r ReplicaReport
			if err := json.Unmarshal(s.Bytes(), &r); err != nil {
				r = ReplicaReport{Event: EventError, Error: fmt.Sprintf("bad output %q: %v", s.Text(), err)}
			}
			p.lines <- r
		}
	}()
	go func() {
		defer close(p.done)
		_ = cmd.Wait()
	}()
	return p, nil
}

// await waits for the next report, which must be of kind event.
func (p *replicaProc) await(ctx context.Context, event string, timeout time.Duration) (ReplicaReport, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ReplicaReport{}, ctx.Err()
	case <-t.C:
		return ReplicaReport{}, fmt.Errorf("no %s report within %v", event, timeout)
	case r, ok := <-p.lines:
		switch {
		case !ok:
			return r, fmt.Errorf("exited before its %s report: %s", event, p.stderr.String())
		case r.Event == EventError:
			return r, fmt.Errorf("%s", r.Error)
		case r.Event != event:
			return r, fmt.Errorf("got a %s report, want %s", r.Event, event)
		}
		return r, nil
	}
}

// kill closes the replica's input, which makes it exit, and kills it if it
// has not exited within a few seconds.
func (p *replicaProc) kill() { closeOrKill(p.cmd, p.stdin, p.done) }

// closeOrKill closes a replica process's input, which makes it exit, and
// kills it if done has not closed within a few seconds; it returns once
// done has closed.
func closeOrKill(cmd *exec.Cmd, stdin io.Closer, done <-chan struct{}) {
	stdin.Close()
	select {
	case <-done:
		return
	case <-time.After(5 * time.Second):
	}
	_ = cmd.Process.Kill()
	<-done
}

// limitedWriter keeps the first max bytes written to it.
type limitedWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (w *limitedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *limitedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - w.buf.Len(); room > 0 {
		w.buf.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}

// ScaleMatrix is the set of cells of the scale benchmark, each run for
// every implementation that is not skipped there.
type ScaleMatrix struct {
	// Cells in the order given; they run from the lightest to the heaviest
	// (elections x replicas), so that a cell that overloads the API server
	// disturbs as few others as possible.
	Cells []Cell
	// Skip names the implementations left out of a cell.
	Skip map[Cell][]Impl
	// Results, filled by RunMatrix, in run order, impl by impl.
	Results []ScaleResult
}

// Skipped reports whether impl is left out of cell.
func (m *ScaleMatrix) Skipped(impl Impl, cell Cell) bool {
	for _, i := range m.Skip[cell] {
		if i == impl {
			return true
		}
	}
	return false
}

// Result returns impl's result at cell.
func (m *ScaleMatrix) Result(impl Impl, cell Cell) (ScaleResult, bool) {
	for _, r := range m.Results {
		if r.Impl == impl && r.Cell == cell {
			return r, true
		}
	}
	return ScaleResult{}, false
}

// RunOrder is the order in which RunMatrix runs the cells: by elections x
// replicas, then by replicas, each cell once.
func (m *ScaleMatrix) RunOrder() []Cell {
	seen := map[Cell]bool{}
	var out []Cell
	for _, c := range m.Cells {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Elections*out[i].Replicas, out[j].Elections*out[j].Replicas
		if a != b {
			return a < b
		}
		return out[i].Replicas < out[j].Replicas
	})
	return out
}

// RunMatrix runs every cell for every implementation of sc.Impls not
// skipped there, one at a time, each in a fresh namespace, and appends the
// results to m.Results.
func RunMatrix(ctx context.Context, env *Env, sc ScaleConfig, m *ScaleMatrix) {
	impls := sc.Impls
	if len(impls) == 0 {
		impls = Impls
	}
	for _, cell := range m.RunOrder() {
		for _, impl := range impls {
			if ctx.Err() != nil {
				return
			}
			if m.Skipped(impl, cell) {
				continue
			}
			began := time.Now()
			res := ScaleResult{Impl: impl, Cell: cell}
			ns, err := newScaleNamespace(ctx, env)
			if err != nil {
				res.Err = err.Error()
			} else {
				res = RunScale(ctx, sc, impl, cell, ns)
			}
			if sc.Logf != nil {
				sc.Logf("  scale %-13s %-26v %8.1f req/s (%s; leaders %s, followers %s, other %s)  cpu %5.1f%%  rss %6.1f MiB  settle %6.0f ms  leaders %d  new terms %d  goroutines/election %.1f  5xx %.0f  start requests (%s)  took %v",
					impl, cell, res.ReqPerSec(), fmtMix(res.Mix()), fmtTotals(res.LeaderRequests()), fmtTotals(res.FollowerRequests()), fmtTotals(res.OtherRequests()),
					res.CPUPercent(), res.PeakRSSMiB(), res.Settle(), res.Leaders(), res.NewTerms(),
					res.GoroutinesPerElection(), res.ServerErrors(), fmtTotals(res.StartRequests()), time.Since(began).Round(time.Second))
			}
			m.Results = append(m.Results, res)
		}
	}
}

// ScaleRecoveryTimeout bounds how long a cell waits for the API server to
// answer again after the previous cell overloaded it.
const ScaleRecoveryTimeout = 2 * time.Minute

// newScaleNamespace creates the namespace of a cell, retrying while the API
// server is still busy with the previous cell's load (a cell that overloads
// it should not fail the cells after it).
func newScaleNamespace(ctx context.Context, env *Env) (string, error) {
	deadline := time.Now().Add(ScaleRecoveryTimeout)
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		ns, err := env.NewNamespace(attemptCtx, "scale")
		cancel()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return ns, err
		}
		if err := sleep(ctx, 2*time.Second); err != nil {
			return "", err
		}
	}
}
