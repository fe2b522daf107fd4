// Command etcd runs a single-member etcd server for local development and
// tests. It wraps go.etcd.io/etcd/server/v3/embed so that the etcd version is
// the one pinned by the k8s.io/kubernetes module in this module's graph.
//
// Only loopback listen addresses are accepted. The process shuts down cleanly
// on SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		name          = flag.String("name", "default", "member name")
		dataDir       = flag.String("data-dir", "", "directory for the member's data (required)")
		clientURL     = flag.String("listen-client-urls", "http://127.0.0.1:2379", "URL to serve clients on; also advertised (loopback only)")
		peerURL       = flag.String("listen-peer-urls", "http://127.0.0.1:2380", "URL to serve peers on; also advertised (loopback only)")
		logLevel      = flag.String("log-level", "warn", "log level: debug, info, warn, error")
		noFsync       = flag.Bool("unsafe-no-fsync", false, "skip fsync; faster, but data can be lost on a machine crash (tests only)")
		quotaBytes    = flag.Int64("quota-backend-bytes", 0, "backend size quota in bytes; 0 uses etcd's default")
		startDeadline = flag.Duration("start-timeout", 60*time.Second, "how long to wait for the server to become ready")
		shutdownGrace = flag.Duration("shutdown-grace", 2*time.Second, "on SIGTERM/SIGINT, after the data is closed, how long open client connections may delay exit")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", flag.Args())
	}
	if *dataDir == "" {
		return errors.New("--data-dir is required")
	}
	curl, err := parseLoopbackURL("--listen-client-urls", *clientURL)
	if err != nil {
		return err
	}
	purl, err := parseLoopbackURL("--listen-peer-urls", *peerURL)
	if err != nil {
		return err
	}

	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{*curl}
	cfg.AdvertiseClientUrls = []url.URL{*curl}
	cfg.ListenPeerUrls = []url.URL{*purl}
	cfg.AdvertisePeerUrls = []url.URL{*purl}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.Logger = "zap"
	cfg.LogLevel = *logLevel
	cfg.LogOutputs = []string{embed.StdErrLogOutput}
	cfg.UnsafeNoFsync = *noFsync
	// NewConfig leaves this at zero, which logs every request as slow.
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	if *quotaBytes > 0 {
		cfg.QuotaBackendBytes = *quotaBytes
	}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	readyCtx, cancel := context.WithTimeout(context.Background(), *startDeadline)
	defer cancel()
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd: ready, serving clients on %s\n", curl)
	case err := <-e.Err():
		closeWithin(e, *shutdownGrace)
		return fmt.Errorf("serve: %w", err)
	case sig := <-sigs:
		fmt.Fprintf(os.Stderr, "etcd: %v before ready, stopping\n", sig)
		return shutdown(e, *shutdownGrace)
	case <-readyCtx.Done():
		closeWithin(e, *shutdownGrace)
		return fmt.Errorf("not ready after %v", *startDeadline)
	}

	select {
	case sig := <-sigs:
		fmt.Fprintf(os.Stderr, "etcd: %v, stopping\n", sig)
		return shutdown(e, *shutdownGrace)
	case err := <-e.Err():
		closeWithin(e, *shutdownGrace)
		return fmt.Errorf("serve: %w", err)
	}
}

// shutdown stops the etcd server proper first, which stops raft and closes
// the WAL and the backend database, so the data on disk is complete and
// consistent. Then it closes the client listeners, giving open client
// streams (an apiserver's watches keep etcd's own close waiting for its
// multi-second request timeout) at most grace before the process exits.
func shutdown(e *embed.Etcd, grace time.Duration) error {
	stopped := make(chan struct{})
	go func() {
		e.Server.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		return errors.New("server did not stop within 30s")
	}
	closeWithin(e, grace)
	fmt.Fprintln(os.Stderr, "etcd: stopped")
	return nil
}

// closeWithin calls e.Close and waits for it at most d.
func closeWithin(e *embed.Etcd, d time.Duration) {
	done := make(chan struct{})
	go func() {
		e.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		fmt.Fprintf(os.Stderr, "etcd: client connections still open after %v; exiting anyway\n", d)
	}
}

// parseLoopbackURL parses an http URL with an explicit port whose host is a
// loopback IP address, so the server is never reachable from other machines.
func parseLoopbackURL(flagName, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("%s: scheme must be http, got %q", flagName, u.Scheme)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || port == "" {
		return nil, fmt.Errorf("%s: %q needs an explicit host:port", flagName, raw)
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("%s: host %q is not a loopback IP address", flagName, host)
	}
	return u, nil
}
