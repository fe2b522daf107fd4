// Command meshd is the mesh control-plane daemon built on meshd's leader
// election. This first version connects to a cluster, contends in one
// prioritized election and logs while it leads; on SIGTERM or SIGINT it stops
// its work, releases the lock and exits 0.
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

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/features"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "meshd:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("meshd", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
	namespace := fs.String("namespace", envOr("POD_NAMESPACE", "istio-system"), "namespace of the election locks")
	identity := fs.String("identity", os.Getenv("POD_NAME"), "holder identity (default unknown-<hostname>)")
	revision := fs.String("revision", envOr("REVISION", election.DefaultRevision), "control-plane revision of this instance")
	remote := fs.Bool("remote", false, "this instance serves a remote cluster")
	electionID := fs.String("election", election.IngressController, "election ID to contend in")
	ttl := fs.Duration("ttl", features.LeaderElectionTTL.Get(), "lease duration (renew deadline ttl/2, retry period ttl/4)")
	if err := fs.Parse(args); err != nil {
		return err
	}

	log, err := zap.NewProduction()
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	features.SetLogger(log)
	if err := features.Validate(); err != nil {
		log.Warn("some environment settings are invalid; their defaults are used", zap.Error(err))
	}

	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}

	le, err := election.NewLeaderElectionMulticluster(*namespace, *identity, *electionID, *revision, *remote, client,
		election.WithTTL(*ttl), election.WithLogger(log))
	if err != nil {
		return err
	}
	le.AddRunFunctionContext(func(ctx context.Context) {
		log.Info("leading", zap.String("election", *electionID), zap.String("identity", le.Identity()))
		<-ctx.Done()
		log.Info("stopped leading", zap.String("election", *electionID))
	})

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	done := make(chan struct{})
	go func() { defer close(done); le.RunContext(ctx) }()
	<-ctx.Done()
	log.Info("shutting down")
	select {
	case <-done:
		return nil
	case <-time.After(*ttl):
		return errors.New("election did not stop within one ttl")
	}
}

// restConfig follows the usual order: an explicit kubeconfig, $KUBECONFIG,
// the in-cluster service account, then ~/.kube/config.
func restConfig(path string) (*rest.Config, error) {
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	if path == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
		if home, err := os.UserHomeDir(); err == nil {
			path = filepath.Join(home, ".kube", "config")
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %q: %w", path, err)
	}
	return cfg, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
