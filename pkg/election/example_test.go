package election_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/pkg/election"
)

// A program that embeds one election. The fake clientset stands in for
// kubernetes.NewForConfig; the run function stops the program once it leads,
// where a controller would run until its context is cancelled.
func ExampleNew() {
	client := fake.NewClientset()
	le, err := election.New(client, election.Spec{
		Namespace:  "istio-system",
		ElectionID: "my-controller-leader", // a lock of your own: never one of istiod's (docs/controllers.md)
		Identity:   "meshd-0",
		Revision:   "canary",
	})
	if err != nil {
		log.Fatal(err) // every invalid setting, reported at once
	}
	ctx, stop := context.WithCancel(context.Background())
	le.Add(func(ctx context.Context) error {
		term, _ := election.TermFrom(ctx)
		fmt.Println("leading in", term)
		stop()     // returning an error (or panicking) would end the term instead
		return nil // nil ends this function only; the term goes on
	})
	if err := le.RunContext(ctx); err != nil { // returns once everything has stopped
		log.Fatal(err)
	}
	// Output: leading in istio-system/my-controller-leader term 0 (meshd-0)
}

// Several elections of one process: one default-revision watcher, one
// metrics registration and one event recorder for all of them.
func ExampleGroup() {
	client := fake.NewClientset()
	group, err := election.NewGroup(client, election.WithPrometheus(prometheus.NewRegistry()), election.WithEvents(client))
	if err != nil {
		log.Fatal(err)
	}
	var (
		leading   sync.WaitGroup
		elections []*election.LeaderElection
	)
	for _, spec := range []election.Spec{
		{Namespace: "istio-system", ElectionID: election.NamespaceController, Identity: "meshd-0"},
		{Namespace: "istio-system", ElectionID: election.StatusController, Identity: "meshd-0", Lock: election.LeaseLock},
		{Namespace: "istio-system", ElectionID: election.GatewayDeploymentController, Identity: "meshd-0", PerRevision: true},
	} {
		le, err := group.New(spec)
		if err != nil {
			log.Fatal(err)
		}
		leading.Add(1)
		le.Add(func(ctx context.Context) error { leading.Done(); <-ctx.Done(); return nil })
		elections = append(elections, le)
	}
	ctx, stop := context.WithCancel(context.Background())
	go func() { leading.Wait(); stop() }() // stop once every election leads
	if err := group.Run(ctx); err != nil {
		log.Fatal(err)
	}
	for _, le := range elections {
		s := le.Status()
		fmt.Println(s.Lock, s.Name, "leader:", s.Leader)
	}
	// Output:
	// ConfigMap istio-namespace-controller-election leader: false
	// Lease istio-status-leader leader: false
	// Lease istio-gateway-deployment-default leader: false
}

// Standalone elections that should share their watches, session and
// pacing are given one Shared, as etcd's elections are given one Session.
// Without it each would make its own; a Group does this for its elections.
func ExampleNewShared() {
	client := fake.NewClientset()
	shared := election.NewShared()
	var les []*election.LeaderElection
	for _, id := range []string{"controller-a-leader", "controller-b-leader"} {
		le, err := election.New(client, election.Spec{Namespace: "istio-system", ElectionID: id, Lock: election.LeaseLock},
			election.WithShared(shared))
		if err != nil {
			log.Fatal(err)
		}
		les = append(les, le)
	}
	fmt.Println("one identity:", les[0].Identity() == shared.Identity() && les[1].Identity() == shared.Identity())

	var leading sync.WaitGroup
	ctx, stop := context.WithCancel(context.Background())
	for _, le := range les {
		leading.Add(1)
		le.Add(func(ctx context.Context) error {
			leading.Done()
			<-ctx.Done()
			return nil
		})
	}
	var running sync.WaitGroup
	for _, le := range les {
		running.Go(func() { _ = le.RunContext(ctx) })
	}
	leading.Wait()
	fmt.Println("both leading:", les[0].IsLeader() && les[1].IsLeader())
	stop()
	running.Wait()
	fmt.Println("after Run, leading:", les[0].IsLeader() || les[1].IsLeader())
	// Output:
	// one identity: true
	// both leading: true
	// after Run, leading: false
}

// Code written against istiod's leaderelection package ports by changing
// the import and handling the constructor's error.
func ExampleNewLeaderElection() {
	client := fake.NewClientset()
	le, err := election.NewLeaderElection("istio-system", "istiod-0", election.IngressController, "stable", client)
	if err != nil {
		log.Fatal(err)
	}
	stop := make(chan struct{})
	le.AddRunFunction(func(leaderStop <-chan struct{}) {
		fmt.Println("leading")
		close(stop) // stop the candidate; leaderStop closes next
		<-leaderStop
	})
	le.Run(stop)
	fmt.Println("stopped; leader:", le.IsLeader())
	// Output:
	// leading
	// stopped; leader: false
}
