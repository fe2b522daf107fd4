package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runBinary runs the meshd binary bin with args and the environment
// changed by env, and returns its exit status, stdout and stderr.
func runBinary(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("meshd %v: %v", args, err)
	return 0, "", ""
}

// "meshd env" and "meshd run" agree about a bad environment value: run
// refuses to start, and env, which still lists every variable, reports it
// as an error and exits 1 rather than warning. And with no cluster
// configured anywhere, meshd says where it looked, in its own words, not
// client-go's hint about KUBERNETES_MASTER. Variables are read once per
// process, hence processes of their own.
func TestEnvAndNoClusterErrors(t *testing.T) {
	bin := meshdBinary(t)

	code, stdout, stderr := runBinary(t, bin, []string{"LEADER_ELECTION_TTL=soon"}, "env")
	if code != 1 || !strings.Contains(stderr, `$LEADER_ELECTION_TTL="soon": not a valid duration`) ||
		!strings.Contains(stderr, "meshd run refuses to start") || strings.Contains(stderr, "warning:") {
		t.Errorf("meshd env with a bad value: exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "LEADER_ELECTION_TTL") {
		t.Errorf("meshd env with a bad value no longer lists the variables:\n%s", stdout)
	}
	if code, _, stderr := runBinary(t, bin, nil, "env"); code != 0 || stderr != "" {
		t.Errorf("meshd env in a clean environment: exit %d, stderr %q", code, stderr)
	}

	home := t.TempDir()
	noCluster := []string{"HOME=" + home, "KUBECONFIG=", "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=", "KUBERNETES_MASTER="}
	code, _, stderr = runBinary(t, bin, noCluster, "status")
	want := "no cluster to talk to: no --kubeconfig, $KUBECONFIG is not set, no in-cluster service account (not running in a Pod) and no " +
		filepath.Join(home, ".kube", "config")
	if code != 1 || !strings.Contains(stderr, want) || strings.Contains(stderr, "KUBERNETES_MASTER") {
		t.Errorf("meshd status without a cluster: exit %d, stderr:\n%s\nwant %q", code, stderr, want)
	}
}

// --ttl 0 is refused like any other value under 1s; the default is what
// leaving the flag out gives.
func TestZeroTTLIsRefused(t *testing.T) {
	code, _, stderr := meshd(t, context.Background(), "run", "--ttl", "0")
	if code != 1 || !strings.Contains(stderr, "--ttl 0s: must be at least 1s (leave --ttl out for the default)") {
		t.Errorf("meshd run --ttl 0: exit %d, stderr %q", code, stderr)
	}
}
