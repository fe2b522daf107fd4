package testcluster

import (
	"errors"
	"fmt"
	"sync"

	"github.com/meshd-io/meshd/internal/errlist"
)

// StartSeveral starts n independent clusters, each with its own etcd and
// kube-apiserver on loopback, at once; a multi-cluster mesh in one
// process. opts applies to each, except Dir: each cluster gets a
// temporary directory of its own (opts.Dir must be empty). On error none
// is left running.
func StartSeveral(n int, opts Options) ([]*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("testcluster: StartSeveral(%d): want at least one cluster", n)
	}
	if opts.Dir != "" {
		return nil, errors.New("testcluster: StartSeveral: Options.Dir must be empty (each cluster gets its own directory)")
	}
	clusters := make([]*Cluster, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range clusters {
		wg.Go(func() {
			clusters[i], errs[i] = Start(opts)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("cluster %d of %d: %w", i+1, n, errs[i])
			}
		})
	}
	wg.Wait()
	if err := errlist.Join(errs...); err != nil {
		StopAll(clusters)
		return nil, err
	}
	return clusters, nil
}

// StopAll stops every cluster that is not nil, at once, and returns their
// errors joined.
func StopAll(clusters []*Cluster) error {
	errs := make([]error, len(clusters))
	var wg sync.WaitGroup
	for i, c := range clusters {
		if c != nil {
			wg.Go(func() { errs[i] = c.Stop() })
		}
	}
	wg.Wait()
	return errlist.Join(errs...)
}
