package elector

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/meshd-io/meshd/internal/pacing"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
)

// An election waiting for its first attempt's turn waits on its own
// goroutine: thousands start together, and each used to wait on a second
// goroutine (the one its decisions run on), so a starting replica of 1000
// elections held about 600 more goroutines (and their stacks) at its peak
// than one that waits in place. Here every slot of the pacer is taken, so
// every elector waits for its turn; none may wait on a goroutine of
// package ownstack.
func TestAnElectionWaitsForItsFirstTurnOnItsOwnGoroutine(t *testing.T) {
	const n = 2 * pacing.FirstAttemptsInFlight
	client := kubetest.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	sh := newShared()
	var releases []func()
	for i := 0; i < pacing.FirstAttemptsInFlight; i++ {
		releases = append(releases, sh.pacer.Turn(context.Background(), fmt.Sprint("other-", i), nil, func() bool { return false }))
	}
	electors := make([]*LeaderElector, n)
	for i := range electors {
		electors[i] = runWatching(t, client, clk, sh, fmt.Sprintf("lock-%d", i), "me")
	}
	var waiting, onOwnstack int
	deadline := time.Now().Add(10 * time.Second)
	// A watch delivery may pass through a short-lived goroutine of package
	// ownstack started from the wait (an elector taking in what its watch
	// listed); an elector that waits on such a goroutine does so in every
	// sample, so the count must reach 0 in one.
	for (waiting < n || onOwnstack != 0) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		waiting, onOwnstack = pacingWaiters()
	}
	if waiting != n {
		t.Fatalf("%d of %d electors wait for their turn", waiting, n)
	}
	if onOwnstack != 0 {
		t.Fatalf("%d of %d electors wait for their turn on a goroutine of their decisions, besides their own", onOwnstack, n)
	}
	for _, release := range releases {
		release()
	}
	for i, le := range electors {
		waitFor(t, fmt.Sprintf("elector %d to lead", i), le.IsLeader)
	}
}

// pacingWaiters counts the goroutines waiting in package pacing, and those
// of them started by package ownstack.
func pacingWaiters() (waiting, onOwnstack int) {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "internal/pacing.await") {
			waiting++
			if strings.Contains(g, "internal/ownstack.Call") {
				onOwnstack++
			}
		}
	}
	return waiting, onOwnstack
}
