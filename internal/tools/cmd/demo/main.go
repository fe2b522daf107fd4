// Command demo shows meshd's prioritized, multi-revision leader election on a
// throwaway local control plane. It needs nothing but the repository: it
// starts etcd and kube-apiserver on 127.0.0.1 (internal/testing/testcluster), runs
// four meshd processes (revisions stable and canary, one stable instance
// serving a remote cluster), and walks through:
//
//  1. no default revision: first come, first served;
//  2. the default revision becomes stable: it takes the prioritized
//     elections, while per-revision elections keep one leader per revision;
//  3. the default flips to canary: leadership moves, and the handover is
//     timed;
//  4. the namespace election's leader is killed with SIGKILL: another
//     instance takes over once the lease runs out; then it comes back;
//  5. a leader is stopped with SIGTERM: it releases its locks, and the
//     handover is timed;
//  6. two more meshd processes run in Pods at ttl 30s; the leader is
//     killed with SIGKILL, the demo reports its container terminated a
//     second later as the kubelet would, and the follower takes over on
//     that report instead of the lease; the demo says why that is safe;
//  7. a summary of every measured time.
//
// A table of who leads what is kept on screen (printed after each step when
// the output is not a terminal). The demo stops everything it started and
// removes its files when it ends, also on Ctrl-C and on failure. It exits 0
// when every step met its expectation in time, 1 otherwise, 130 on Ctrl-C.
//
// Run it with "make demo", or hack/demo.sh, or
//
//	go build -o bin/meshd ./cmd/meshd && go run ./internal/tools/cmd/demo
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/meshd-io/meshd/internal/tools/demorun"
)

func main() {
	os.Exit(run())
}

type options struct {
	meshd     string
	namespace string
	ttl       time.Duration
	plain     bool
	keep      bool
}

func run() int {
	var o options
	flag.StringVar(&o.meshd, "meshd", "", "the meshd binary (default: bin/meshd at the repository root)")
	flag.StringVar(&o.namespace, "namespace", "istio-system", "mesh namespace, where the locks live")
	flag.DurationVar(&o.ttl, "ttl", 4*time.Second, "lease duration of every election (renew deadline ttl/2, retry ttl/4)")
	flag.BoolVar(&o.plain, "plain", false, "print table snapshots instead of a live table, even on a terminal")
	flag.BoolVar(&o.keep, "keep", false, "keep the kubeconfig and the meshd logs instead of removing them")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "demo: unexpected arguments %v\n", flag.Args())
		return 2
	}
	if o.ttl < 2*time.Second {
		fmt.Fprintln(os.Stderr, "demo: -ttl must be at least 2s")
		return 2
	}
	meshd, err := demorun.FindMeshd(o.meshd, "demo")
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	o.meshd = meshd
	return demorun.Run("demo", func(ctx context.Context) error { return runDemo(ctx, o) })
}

// runDemo sets everything up, tells the story and tears everything down.
func runDemo(ctx context.Context, o options) (err error) {
	d := &demo{opts: o, ctx: ctx, procs: map[string]*member{}}
	d.scr = newScreen(os.Stdout, o.plain, d.table)
	defer func() {
		cleanupErr := d.cleanup(err != nil && ctx.Err() == nil)
		if err == nil {
			err = cleanupErr
		}
	}()
	if err := d.setup(); err != nil {
		return err
	}
	if err := d.story(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	return nil
}
