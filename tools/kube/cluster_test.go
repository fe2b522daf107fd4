package kube

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeControlPlane stands in for localcluster: it takes a while to become
// ready, as on a loaded machine, then writes the ready file and runs until
// SIGTERM. Its command line does not say "localcluster", as a process that
// has been forked but has not exec'd yet does not.
const fakeControlPlane = `#!/bin/sh
dir="$2"
echo "$@" >"$dir/args"
sleep 1
echo "export KUBECONFIG=$dir/kubeconfig" >"$dir/ready"
trap 'exit 0' TERM
while :; do sleep 0.1; done
`

func clusterScript(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	fake := filepath.Join(t.TempDir(), "control-plane")
	if err := os.WriteFile(fake, []byte(fakeControlPlane), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{"cluster.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "CLUSTER_DIR="+dir, "LOCALCLUSTER="+fake, "CLUSTER_READY_TIMEOUT=30", "CLUSTER_FLAGS=-coordinated")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func pidOf(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.Fields(string(b))[0])
	if err != nil {
		t.Fatalf("pidfile %q: %v", b, err)
	}
	return pid
}

// "up" waits for a slow control plane instead of calling it dead, keeps
// the pidfile, and "down" stops the very process "up" started.
func TestClusterUpWaitsAndDownStops(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster")
	out, err := clusterScript(t, dir, "up")
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	if !strings.Contains(out, "export KUBECONFIG="+dir+"/kubeconfig") {
		t.Errorf("up did not print the ready line:\n%s", out)
	}
	pid := pidOf(t, dir)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if args, err := os.ReadFile(filepath.Join(dir, "args")); err != nil || strings.TrimSpace(string(args)) != "-dir "+dir+" -coordinated" {
		t.Errorf("the control plane ran with %q (%v), want -dir %s -coordinated", args, err, dir)
	}
	if !alive(pid) {
		t.Fatalf("the control plane (pid %d) is not running after up", pid)
	}
	// A second "up" finds it running and only prints the ready line.
	if out, err := clusterScript(t, dir, "up"); err != nil || strings.Contains(out, "starting") {
		t.Errorf("second up: %v\n%s", err, out)
	}

	out, err = clusterScript(t, dir, "down")
	if err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if !strings.Contains(out, "stopping localcluster (pid "+strconv.Itoa(pid)+")") {
		t.Errorf("down did not stop pid %d:\n%s", pid, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	// The fake is a child of the script's shell, reaped by init: gone, or
	// at worst a zombie that no longer runs.
	if alive(pid) && !zombie(pid) {
		t.Errorf("pid %d still runs after down", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("down left %s: %v", dir, err)
	}
}

// A pidfile naming a live process that the script did not start (a reused
// pid: same number, another start time) is not stopped by "down".
func TestClusterDownSparesAReusedPid(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	if err := os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(other.Process.Pid)+" 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := clusterScript(t, dir, "down")
	if err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if !strings.Contains(out, "not running") || !alive(other.Process.Pid) {
		t.Errorf("down with a reused pid:\n%s", out)
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndex(s, ") ")
	return i >= 0 && strings.HasPrefix(s[i+2:], "Z")
}
