package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshd-io/meshd/pkg/election"
	"go.uber.org/zap"
	"k8s.io/client-go/tools/clientcmd"
)

// StartSpread is the time over which a replica starts its elections.
const StartSpread = time.Second

// ReplicaOptions configure one replica process of the scale benchmark.
type ReplicaOptions struct {
	Impl       Impl
	Elections  int
	TTL        time.Duration
	Namespace  string
	Identity   string
	Kubeconfig string
	// LogFile, if set, receives meshd's elector logs (info and above).
	LogFile string
	// RequestLog, if set, receives one line per API request the replica
	// sends: time, verb, method and URL (for diagnosis).
	RequestLog string
	// HeapProfile, if set, receives a heap profile of the replica taken
	// at the end of the window, after the result has been measured, with
	// its goroutines and memory statistics beside it.
	HeapProfile string
}

// Replica protocol: the replica writes one JSON ReplicaReport per line to
// its stdout. It starts its elections, reports EventSettled once every
// election has a known leader, then reads "start" and "stop" lines from its
// stdin and reports EventResult for the window between them. It exits on
// end of input or when its context ends.
const (
	EventSettled = "settled"
	EventResult  = "result"
	EventError   = "error"

	cmdStart = "start"
	cmdStop  = "stop"
)

// ReplicaReport is one line of a replica's output.
type ReplicaReport struct {
	Event string `json:"event"`
	// Settle is the longest time an election took, from its start, until
	// this replica knew its leader.
	Settle time.Duration `json:"settle,omitempty"`
	// Window, Requests and CPU cover the time between start and stop.
	Window   time.Duration `json:"window,omitempty"`
	Requests Counts        `json:"requests,omitempty"`
	CPU      time.Duration `json:"cpu,omitempty"`
	// LeaderRequests and FollowerRequests are the window's requests to the
	// Leases of the elections this replica led at stop, and to those of the
	// elections it did not lead. Requests naming no election's Lease (a
	// watch, a list, a session's heartbeat) are in neither.
	LeaderRequests   Counts `json:"leaderRequests,omitempty"`
	FollowerRequests Counts `json:"followerRequests,omitempty"`
	// PeakRSSKiB is the process's peak RSS, RSSKiB its RSS at stop.
	PeakRSSKiB int64 `json:"peakRSSKiB,omitempty"`
	RSSKiB     int64 `json:"rssKiB,omitempty"`
	// Leading is how many of the elections this replica leads at stop.
	Leading int `json:"leading,omitempty"`
	// NewTerms counts terms (run function starts) that began during the
	// window: zero when the elections are in a steady state.
	NewTerms int `json:"newTerms,omitempty"`
	// Goroutines is the number of goroutines the elections added to the
	// process, counted once settled.
	Goroutines int `json:"goroutines,omitempty"`
	// StartRequests are the requests the replica sent from its start until
	// it settled: what starting its elections cost the API server.
	StartRequests Counts `json:"startRequests,omitempty"`
	// ServerErrors counts 5xx responses and requests without a response
	// from the replica's start to stop.
	ServerErrors int    `json:"serverErrors,omitempty"`
	Error        string `json:"error,omitempty"`
	// Unsettled, in an error report, is how many elections still had no
	// known leader when the replica gave up waiting (ScaleSettleTimeout).
	Unsettled int `json:"unsettled,omitempty"`
}

// RunReplica runs the replica side of the scale benchmark; see the protocol
// above. in and out are normally stdin and stdout.
func RunReplica(ctx context.Context, o ReplicaOptions, in io.Reader, out io.Writer) error {
	enc := json.NewEncoder(out)
	failure := ReplicaReport{Event: EventError}
	err := runReplica(ctx, o, in, enc, &failure)
	if err != nil {
		failure.Error = err.Error()
		failure.PeakRSSKiB = selfUsage().PeakRSSKiB
		_ = enc.Encode(failure)
	}
	return err
}

// runReplica runs the replica; when it fails to settle it also fills in
// failure's counts (the error itself is left to the caller).
func runReplica(ctx context.Context, o ReplicaOptions, in io.Reader, enc *json.Encoder, failure *ReplicaReport) error {
	quietKlog()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmds := make(chan string)
	go func() {
		// The benchmark closes the input when it is done or gone: stop.
		defer cancel()
		defer close(cmds)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			select {
			case cmds <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	next := func(want string) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case c, ok := <-cmds:
			if !ok {
				return fmt.Errorf("input closed while waiting for %q", want)
			}
			if c != want {
				return fmt.Errorf("got %q, want %q", c, want)
			}
			return nil
		}
	}

	restCfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return err
	}
	counter, byLease := NewCounter(), NewLeaseRequests()
	if o.RequestLog != "" {
		closeLog, err := traceRequests(counter, o.RequestLog)
		if err != nil {
			return err
		}
		defer closeLog()
	}
	client, err := newClient(byLease.Config(restCfg), counter)
	if err != nil {
		return err
	}
	var logger *zap.Logger
	if o.LogFile != "" {
		cfg := zap.NewProductionConfig()
		cfg.OutputPaths = []string{o.LogFile}
		cfg.Sampling = nil
		if logger, err = cfg.Build(); err != nil {
			return err
		}
		defer logger.Sync()
	}
	// One clientset for all elections, as in a real control plane process.
	var terms atomic.Int64
	work := func(ctx context.Context) {
		terms.Add(1)
		<-ctx.Done()
	}
	// meshd's elections are prioritized, as NewLeaseLeaderElection makes
	// them by default: each also follows the default revision.
	revision := ""
	if o.Impl != ClientGo {
		revision = "default"
	}
	baseGoroutines := runtime.NumGoroutine()
	// What the process's elections share (one watch per kind, one pacer),
	// as a Group would give them.
	shared := election.NewShared()
	cands := make([]Candidate, o.Elections)
	locks := make([]string, o.Elections)
	for i := range cands {
		locks[i] = fmt.Sprintf("e%04d", i)
		cands[i], err = NewCandidate(Spec{
			Impl: o.Impl, Client: client, Namespace: o.Namespace, Lock: locks[i],
			Identity: o.Identity, TTL: o.TTL, Logger: logger, Work: work, Revision: revision, Shared: shared,
		})
		if err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	// Starts are spread evenly over StartSpread rather than made in one
	// instant, so that elections do not renew in lock-step: a window would
	// then count one renewal more or fewer for all of them at once.
	t0 := time.Now()
	startAt := make([]time.Time, len(cands))
	for i, c := range cands {
		startAt[i] = t0.Add(time.Duration(i) * StartSpread / time.Duration(len(cands)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sleep(ctx, time.Until(startAt[i])) == nil {
				c.Run(ctx)
			}
		}()
	}
	settle, err := awaitLeaders(ctx, cands, startAt)
	if err != nil {
		var se *settleError
		if errors.As(err, &se) {
			failure.Unsettled = se.pending
		}
		failure.ServerErrors, failure.StartRequests = counter.ServerErrors(), counter.Snapshot()
		return err
	}
	goroutines := runtime.NumGoroutine() - baseGoroutines
	if o.HeapProfile != "" {
		if err := appendMemStats(o.HeapProfile+".memstats", "settled"); err != nil {
			return err
		}
	}
	settled := ReplicaReport{Event: EventSettled, Settle: settle, Goroutines: goroutines, StartRequests: counter.Snapshot()}
	if err := enc.Encode(settled); err != nil {
		return err
	}

	if err := next(cmdStart); err != nil {
		return err
	}
	c0, l0, u0, w0, t0terms := counter.Snapshot(), byLease.Snapshot(), selfUsage(), time.Now(), terms.Load()
	if err := next(cmdStop); err != nil {
		return err
	}
	c1, l1, u1, w1, t1terms := counter.Snapshot(), byLease.Snapshot(), selfUsage(), time.Now(), terms.Load()
	leading := 0
	leads := make(map[string]bool, len(cands))
	for i, c := range cands {
		leads[locks[i]] = c.Leading()
		if leads[locks[i]] {
			leading++
		}
	}
	leader, follower := splitByLeader(l0, l1, leads)
	result := ReplicaReport{
		Event: EventResult, Window: w1.Sub(w0), Requests: c1.Sub(c0), CPU: u1.CPU - u0.CPU,
		LeaderRequests: leader, FollowerRequests: follower,
		PeakRSSKiB: u1.PeakRSSKiB, RSSKiB: u1.RSSKiB, Leading: leading,
		NewTerms: int(t1terms - t0terms), ServerErrors: counter.ServerErrors(),
	}
	if o.HeapProfile != "" {
		if err := appendMemStats(o.HeapProfile+".memstats", "window end"); err != nil {
			return err
		}
		if err := writeHeapProfile(o.HeapProfile); err != nil {
			return err
		}
	}
	return enc.Encode(result)
}

// awaitLeaders waits until every candidate knows a leader and returns the
// longest time one took, from its start.
func awaitLeaders(ctx context.Context, cands []Candidate, startAt []time.Time) (time.Duration, error) {
	var longest time.Duration
	pending := make([]int, len(cands))
	for i := range pending {
		pending[i] = i
	}
	deadline := time.Now().Add(ScaleSettleTimeout)
	for len(pending) > 0 {
		now := time.Now()
		if now.After(deadline) {
			return 0, &settleError{pending: len(pending), total: len(cands)}
		}
		left := pending[:0]
		for _, i := range pending {
			if now.After(startAt[i]) && cands[i].Leader() != "" {
				longest = max(longest, now.Sub(startAt[i]))
			} else {
				left = append(left, i)
			}
		}
		pending = left
		if err := sleep(ctx, 2*time.Millisecond); err != nil {
			return 0, err
		}
	}
	return longest, nil
}

// settleError says that some elections had no known leader after
// ScaleSettleTimeout.
type settleError struct{ pending, total int }

func (e *settleError) Error() string {
	return fmt.Sprintf("%v after %v: %d of %d elections have no known leader", errTimeout, ScaleSettleTimeout, e.pending, e.total)
}

func (e *settleError) Unwrap() error { return errTimeout }
