// Command localcluster runs the test control plane of internal/testing/testcluster
// (etcd and kube-apiserver on 127.0.0.1) for local development until it
// receives SIGTERM or SIGINT. It is started by "make cluster-up".
//
// Its state lives in -dir (default .cache/cluster at the repository root):
// the cluster data in data/, a kubeconfig for the admin and the restricted
// static users in kubeconfig, and a file named ready, written once the
// kubeconfig has been checked to work, holding the line
// "export KUBECONFIG=<path>". The ready file and the kubeconfig are removed
// on exit; the data directory, with the control plane's logs, is left for
// "make cluster-down" to remove.
//
// -coordinated turns on the API server's CoordinatedLeaderElection feature
// gate and serves coordination.k8s.io/v1beta1 (LeaseCandidates), so that
// meshd's coordinated election modes can be tried locally
// ("make cluster-up CLUSTER_FLAGS=-coordinated").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/meshd-io/meshd/internal/errlist"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", "", "state directory (default: .cache/cluster at the repository root)")
	timeout := flag.Duration("start-timeout", 3*time.Minute, "how long etcd and kube-apiserver may each take to become ready")
	coordinated := flag.Bool("coordinated", false, "serve LeaseCandidates (feature gate CoordinatedLeaderElection), for meshd's coordinated modes")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", flag.Args())
	}
	if *dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		root, err := testcluster.RepoRoot(wd)
		if err != nil {
			return err
		}
		*dir = filepath.Join(root, ".cache", "cluster")
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(abs, "kubeconfig")
	readyFile := filepath.Join(abs, "ready")

	// Catch signals before starting so an early SIGTERM still stops the
	// children cleanly.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	fmt.Printf("starting etcd and kube-apiserver with state in %s\n", abs)
	start := time.Now()
	c, err := testcluster.Start(options(filepath.Join(abs, "data"), *timeout, *coordinated))
	if err != nil {
		return err
	}
	defer func() {
		os.Remove(readyFile)
		os.Remove(kubeconfig)
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "localcluster: stop: %v\n", err)
		}
		fmt.Println("stopped")
	}()

	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	if err := checkKubeconfig(kubeconfig); err != nil {
		return err
	}
	exportLine := "export KUBECONFIG=" + kubeconfig
	if err := os.WriteFile(readyFile, []byte(exportLine+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Printf("ready in %v: apiserver %s, logs in %s\n", time.Since(start).Round(time.Millisecond), c.Host(), filepath.Join(abs, "data"))
	fmt.Println(exportLine)

	sig := <-sigs
	fmt.Printf("received %v, stopping\n", sig)
	return nil
}

// coordinatedFlags make the API server serve coordinated leader election:
// the feature gate and its beta API, both off by default.
var coordinatedFlags = []string{
	"--feature-gates=CoordinatedLeaderElection=true",
	"--runtime-config=coordination.k8s.io/v1beta1=true",
}

// options are the control plane's options: state in dir, and with
// coordinated, LeaseCandidates served.
func options(dir string, timeout time.Duration, coordinated bool) testcluster.Options {
	o := testcluster.Options{Dir: dir, StartTimeout: timeout}
	if coordinated {
		o.APIServerFlags = coordinatedFlags
	}
	return o
}

// checkKubeconfig loads the written kubeconfig and lists namespaces with it.
func checkKubeconfig(path string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		return errlist.Join(errors.New("the written kubeconfig does not work"), err)
	}
	return nil
}
