package controllers

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/meshd-io/meshd/pkg/election"
)

type countingController struct{ runs atomic.Int32 }

func (c *countingController) Name() string { return "counting" }

func (c *countingController) Run(ctx context.Context) {
	c.runs.Add(1)
	<-ctx.Done()
}

func TestGateRunsControllersWhileLeading(t *testing.T) {
	// With elections disabled the run functions start at once.
	le, err := election.NewLeaderElection("istio-system", "me", election.StatusController, "", nil, election.WithEnabled(false))
	if err != nil {
		t.Fatal(err)
	}
	a, b := &countingController{}, &countingController{}
	Gate(le, a, b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); le.RunContext(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for a.runs.Load() == 0 || b.runs.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("controllers not started")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if a.runs.Load() != 1 || b.runs.Load() != 1 {
		t.Fatalf("runs = %d, %d", a.runs.Load(), b.runs.Load())
	}
}

func TestPrepareListsEveryProblemOnOneLine(t *testing.T) {
	// Options report their problems as a multierror, as validate does.
	optionsErr := multierror.Append(nil, errors.New("first"), errors.New("second"))
	_, err := Prepare("demo", nil, optionsErr, nil)
	if err == nil || err.Error() != "demo controller: nil Kubernetes client; first; second" {
		t.Fatalf("err = %q", err)
	}
}
