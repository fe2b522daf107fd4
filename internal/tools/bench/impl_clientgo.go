package bench

import (
	"context"
	"io"
	"sync"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/meshd-io/meshd/pkg/election/elector"
)

var silenceKlog sync.Once

// quietKlog stops client-go's elector and informers from logging every
// acquisition and renewal failure to stderr.
func quietKlog() {
	silenceKlog.Do(func() {
		klog.SetLogger(logr.Discard())
		klog.SetOutput(io.Discard)
	})
}

type clientGoCandidate struct {
	le *leaderelection.LeaderElector

	// client-go starts OnStartedLeading in a goroutine and does not wait for
	// it; Run waits here instead.
	mu      sync.Mutex
	idle    *sync.Cond // signalled when running drops
	running int
	closed  bool // Run has returned: late work is skipped
}

// newClientGo builds client-go's elector on a LeaseLock with the same
// timings meshd derives from the ttl.
func newClientGo(s Spec) (*clientGoCandidate, error) {
	quietKlog()
	lease, renew, retry := elector.TimingFromTTL(s.TTL)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Lock},
		Client:     s.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: s.Identity},
	}
	c := &clientGoCandidate{}
	c.idle = sync.NewCond(&c.mu)
	work := func(ctx context.Context) {
		if !c.begin() {
			return
		}
		defer c.end()
		s.Work(ctx)
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   lease,
		RenewDeadline:   renew,
		RetryPeriod:     retry,
		ReleaseOnCancel: s.ReleaseOnCancel,
		Name:            s.Lock,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: work,
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return nil, err
	}
	c.le = le
	return c, nil
}

// Run loops client-go's Run, which returns after one term, as a controller
// manager restarting its elector would.
func (c *clientGoCandidate) Run(ctx context.Context) {
	for ctx.Err() == nil {
		c.le.Run(ctx)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for c.running > 0 {
		c.idle.Wait()
	}
}

func (c *clientGoCandidate) begin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.running++
	return true
}

func (c *clientGoCandidate) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running--
	c.idle.Broadcast()
}

func (c *clientGoCandidate) Leader() string { return c.le.GetLeader() }

// Leading reports whether the work runs: client-go's IsLeader only compares
// the last observed record with this identity, which stays true after Run
// has returned.
func (c *clientGoCandidate) Leading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running > 0
}
