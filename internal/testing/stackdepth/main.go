// Command stackdepth runs candidates of two elections on a fake clientset
// until each election has a leader and a follower that both wait, then
// makes the runtime print every goroutine's stack with the addresses of its
// frames (SIGQUIT; run it with GOTRACEBACK=system). The test beside it
// builds it without the race detector, as programs are built, and reads how
// much of its stack each waiting candidate uses.
//
// One election runs its candidates with LeaderElection.Run(stop), istiod's
// way and the deepest way in; the other with a Group each, meshd's way.
package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/pkg/election"
)

// The frames the test looks for: a leader waits in renew, a follower in
// acquire.
const (
	leaderFrame   = "(*LeaderElector).renew("
	followerFrame = "(*LeaderElector).acquire("
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "stackdepth:", err)
		os.Exit(1)
	}
}

func run() error {
	client := fake.NewClientset()
	opts := []election.Option{
		election.WithEnabled(true),
		election.WithWatch(true),
		election.WithHandover(true, election.DefaultHandoverGrace),
	}
	spec := func(id, identity string) election.Spec {
		return election.Spec{Namespace: "istio-system", ElectionID: id, Identity: identity, Lock: election.LeaseLock}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var all []*election.LeaderElection
	for _, identity := range []string{"a", "b"} {
		le, err := election.New(client, spec("by-run", identity), opts...)
		if err != nil {
			return err
		}
		le.Add(work)
		go le.Run(ctx.Done())
		all = append(all, le)

		g, err := election.NewGroup(client, opts...)
		if err != nil {
			return err
		}
		le, err = g.New(spec("by-group", identity))
		if err != nil {
			return err
		}
		le.Add(work)
		go func() { _ = g.Run(ctx) }()
		all = append(all, le)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !waiting(all) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the candidates did not settle into a leader and a follower per election within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Every goroutine's stack, with frame addresses, and exit status 2.
	if err := syscall.Kill(os.Getpid(), syscall.SIGQUIT); err != nil {
		return err
	}
	time.Sleep(10 * time.Second)
	return fmt.Errorf("SIGQUIT did not end the process")
}

// work is a run function that waits for the end of its term.
func work(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// waiting reports whether each election has one leader, every candidate
// knows it, and two candidates wait in renew and two in acquire.
func waiting(all []*election.LeaderElection) bool {
	leaders := 0
	for _, le := range all {
		if le.IsLeader() {
			leaders++
		}
		if le.Status().Holder == "" {
			return false
		}
	}
	if leaders != 2 {
		return false
	}
	buf := make([]byte, 1<<20)
	stacks := buf[:runtime.Stack(buf, true)]
	return bytes.Count(stacks, []byte(leaderFrame)) == 2 && bytes.Count(stacks, []byte(followerFrame)) == 2
}
