package controllers

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/errlist"
	"github.com/meshd-io/meshd/pkg/election"
)

// Controller is work that runs only while its election is led.
type Controller interface {
	// Name is the short name used in logs and in the controller label of the
	// metrics, for example "namespace", "status" or "revision".
	Name() string
	// Run starts informers, reconciles and writes until ctx is done. It
	// returns after everything it started has stopped.
	Run(ctx context.Context)
}

// Reporter is implemented by a controller that can tell why it does not do
// its work although it runs, such as a namespace controller with no root
// certificate to publish. The daemon shows the problem in /readyz and
// /debug/elections.
type Reporter interface {
	// Problem returns why the running controller does not do its work, or
	// nil when it does or does not run. It is safe for concurrent use.
	Problem() error
}

// Gate makes the controllers run while e is led: each one's Run is
// registered as a run function of e. A controller that returns while still
// leading fails its term, so that the election hands the work over or
// restarts it after a back-off. Call it before e.Run.
func Gate(e *election.LeaderElection, cs ...Controller) {
	for _, c := range cs {
		e.Add(RunFunc(c, c.Run))
	}
}

// RunFunc adapts run, the Run of c or a wrapper of it, to an election run
// function: returning while ctx is still live is an error naming c.
func RunFunc(c Controller, run func(ctx context.Context)) election.RunFunc {
	return func(ctx context.Context) error {
		run(ctx)
		if ctx.Err() == nil {
			return fmt.Errorf("controller %s stopped while leading", c.Name())
		}
		return nil
	}
}

// Prepare is the common part of the controllers' constructors: it reports a
// nil client and the options' validation error together, naming the
// controller, and registers the controller's metrics.
func Prepare(name string, client kubernetes.Interface, optionsErr error, reg prometheus.Registerer) (*Metrics, error) {
	var noClient error
	if client == nil {
		noClient = errors.New("nil Kubernetes client")
	}
	// Every problem on one line, in meshd's words.
	if err := errlist.Join(noClient, optionsErr); err != nil {
		return nil, fmt.Errorf("%s controller: %w", name, err)
	}
	metrics, err := NewMetrics(reg, name)
	if err != nil {
		return nil, fmt.Errorf("%s controller: %w", name, err)
	}
	return metrics, nil
}
