// Command demo-multicluster shows meshd in a mesh of two clusters, each the
// other's remote. It needs nothing but the repository: it starts two
// throwaway control planes (an etcd and a kube-apiserver each, on
// 127.0.0.1), gives each cluster a kubeconfig Secret of the other (label
// istio/multiCluster=true, key = cluster ID), runs one meshd per cluster
// with --multicluster, and walks through:
//
//  1. west's meshd starts first: it leads the namespace election of both
//     clusters, east's with a remote key (^default), and publishes the
//     mesh root into east;
//  2. east's meshd starts: the local instance takes its cluster from the
//     remote one;
//  3. east's meshd is killed (SIGKILL): west's takes east over once the
//     lease has run out;
//  4. east's meshd comes back and takes its cluster back;
//  5. both stop with SIGTERM and release every lock, in both clusters;
//  6. a summary of every measured time.
//
// It exits 0 when every step met its expectation in time, 1 otherwise, 130
// on Ctrl-C, and stops everything it started in every case.
//
// Run it with "make demo-multicluster", or hack/demo-multicluster.sh, or
//
//	go build -o bin/meshd ./cmd/meshd && go run ./internal/tools/cmd/demo-multicluster
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/meshd-io/meshd/internal/tools/demorun"
)

type options struct {
	meshd     string
	namespace string
	ttl       time.Duration
	keep      bool
}

func main() { os.Exit(run()) }

func run() int {
	var o options
	flag.StringVar(&o.meshd, "meshd", "", "the meshd binary (default: bin/meshd at the repository root)")
	flag.StringVar(&o.namespace, "namespace", "istio-system", "mesh namespace, in both clusters")
	flag.DurationVar(&o.ttl, "ttl", 4*time.Second, "lease duration of every election")
	flag.BoolVar(&o.keep, "keep", false, "keep the kubeconfigs and the meshd logs instead of removing them")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "demo-multicluster: unexpected arguments %v\n", flag.Args())
		return 2
	}
	if o.ttl < 2*time.Second {
		fmt.Fprintln(os.Stderr, "demo-multicluster: -ttl must be at least 2s")
		return 2
	}
	meshd, err := demorun.FindMeshd(o.meshd, "demo-multicluster")
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo-multicluster:", err)
		return 1
	}
	o.meshd = meshd
	return demorun.Run("demo-multicluster", func(ctx context.Context) error { return runDemo(ctx, o) })
}
