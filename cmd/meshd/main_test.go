package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"
	clientfeatures "k8s.io/client-go/features"

	"github.com/meshd-io/meshd/internal/testing/testcluster"
)

func TestMain(m *testing.M) {
	code := testcluster.Run(m)
	if dir := builtDir.Load(); dir != nil {
		_ = os.RemoveAll(*dir)
	}
	os.Exit(code)
}

// builtDir is the directory buildMeshd made, if it ran.
var builtDir atomic.Pointer[string]

// buildMeshd builds the meshd binary once for the package's tests.
var buildMeshd = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "meshd-cmd-test-")
	if err != nil {
		return "", err
	}
	builtDir.Store(&dir)
	bin := filepath.Join(dir, "meshd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
})

// meshdBinary is the meshd binary, built once for the tests that run it as
// a process of their own (environment variables are read once per
// process).
func meshdBinary(t *testing.T) string {
	t.Helper()
	bin, err := buildMeshd()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of loggers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// meshd runs the command line in-process and returns its exit status and
// output.
func meshd(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut syncBuffer
	code = execute(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestDefaultCommandIsRun(t *testing.T) {
	root := newRootCommand()
	for _, tc := range []struct{ in, want string }{
		{"", "run"},
		{"--namespace x", "run --namespace x"},
		{"--remote", "run --remote"},
		{"-h", "-h"},
		{"--help", "--help"},
		{"status -o json", "status -o json"},
		{"run --ttl 2s", "run --ttl 2s"},
		{"help run", "help run"},
		{"bogus", "bogus"},
	} {
		if got := strings.Join(withDefaultCommand(root, strings.Fields(tc.in)), " "); got != tc.want {
			t.Errorf("withDefaultCommand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--controllers", "namespace,ingress"}, `unknown controllers "ingress"`},
		{[]string{"run", "--controllers", ""}, "no controllers selected"},
		{[]string{"run", "--log-format", "xml"}, `invalid setting: --log-format "xml"`},
		{[]string{"run", "--log-level", "loud"}, `invalid setting: --log-level "loud"`},
		{[]string{"run", "--ttl", "-1s"}, "--ttl -1s: must not be negative"},
		{[]string{"run", "--ttl", "500ms"}, "--ttl 500ms: must be at least 1s"},
		{[]string{"run", "--cluster-id", "east cluster"}, `--cluster-id "east cluster": not a valid cluster ID`},
		{[]string{"run", "--external-control-plane"}, "--external-control-plane applies only with --multicluster"},
		{[]string{"run", "--multicluster", "--controllers", "status"}, `--multicluster needs the namespace controller (--controllers "status")`},
		{[]string{"run", "--monitoring-address", "15014"}, `--monitoring-address "15014"`},
		{[]string{"run", "extra"}, `unknown command "extra"`},
		{[]string{"status", "-o", "yaml"}, `invalid setting: -o "yaml"`},
		{[]string{"status", "-n", "Bad_NS"}, `--namespace "Bad_NS"`},
		{[]string{"env", "-o", "yaml"}, `invalid -o "yaml"`},
		{[]string{"--no-such-flag"}, "unknown flag: --no-such-flag"},
	} {
		code, _, stderr := meshd(t, context.Background(), tc.args...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("meshd %q: exit %d, stderr %q; want exit 1 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// Every bad setting is reported at once, in meshd's words, before any
// client is built: a kubeconfig that does not exist is reported with the
// rest instead of being loaded.
func TestSettingsReportedTogetherBeforeConnecting(t *testing.T) {
	t.Setenv("REVISION", "")
	start := time.Now()
	code, _, stderr := meshd(t, context.Background(), "run", "-n", "Bad_NS", "--revision", "Bad/Rev",
		"--kubeconfig", "/nonexistent", "--controllers", "namespace,nope", "--log-format", "xml")
	if took := time.Since(start); took > time.Second {
		t.Errorf("took %v, want under 1s", took)
	}
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, stderr)
	}
	for _, want := range []string{"meshd: 5 invalid settings:\n  - ", `--namespace "Bad_NS"`, `--revision "Bad/Rev"`,
		`--kubeconfig "/nonexistent": no such file or directory`, `unknown controllers "nope"`, `--log-format "xml"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	for _, unwanted := range []string{"error occurred", "\t*", "kubeconfig\" ", "no cluster to talk to"} {
		if strings.Contains(stderr, unwanted) {
			t.Errorf("stderr has %q:\n%s", unwanted, stderr)
		}
	}
}

func TestHelp(t *testing.T) {
	code, stdout, _ := meshd(t, context.Background(), "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, cmd := range []string{"run", "status", "env", "version"} {
		if !strings.Contains(stdout, "\n  "+cmd+" ") {
			t.Errorf("meshd --help does not list %q:\n%s", cmd, stdout)
		}
	}
	_, stdout, _ = meshd(t, context.Background(), "run", "--help")
	for _, flag := range []string{"--kubeconfig", "--namespace", "--identity", "--revision", "--remote", "--monitoring-address",
		"--ttl", "--controllers", "--log-level", "--log-format", "env POD_NAMESPACE", "env POD_NAME", "env REVISION", "LEADER_ELECTION_TTL"} {
		if !strings.Contains(stdout, flag) {
			t.Errorf("meshd run --help lacks %q", flag)
		}
	}
}

func TestVersion(t *testing.T) {
	code, stdout, _ := meshd(t, context.Background(), "version")
	if code != 0 || !strings.HasPrefix(stdout, "meshd ") || !strings.Contains(stdout, "go:") {
		t.Fatalf("exit %d:\n%s", code, stdout)
	}
}

func TestEnvBindings(t *testing.T) {
	vars := map[string]string{"POD_NAMESPACE": "from-env", "POD_NAME": "", "REVISION": "Bad Revision?"}
	parse := func(args ...string) (runOptions, error) {
		var o runOptions
		env := envBindings{lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		o.register(fs, &env)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return o, env.apply(fs)
	}
	// A variable set to "" counts as unset; flags win over variables.
	o, err := parse("--revision", "canary")
	if err != nil || o.kube.namespace != "from-env" || o.identity != "" || o.revision != "canary" {
		t.Fatalf("from environment: %+v, %v", o, err)
	}
	o, err = parse("--namespace", "from-flag", "--revision", "stable")
	if err != nil || o.kube.namespace != "from-flag" || o.revision != "stable" {
		t.Fatalf("flags must win: %+v, %v", o, err)
	}
	// Values are checked where they are used (the daemon validates the
	// revision); here the variable is simply taken.
	if o, _ = parse(); o.revision != "Bad Revision?" {
		t.Fatalf("REVISION not applied: %+v", o)
	}
}

func TestWithoutWatchList(t *testing.T) {
	all := withoutWatchList{allGates{}}
	if all.Enabled(clientfeatures.WatchListClient) {
		t.Error("WatchListClient still enabled")
	}
	if !all.Enabled(clientfeatures.InformerResourceVersion) {
		t.Error("another feature was turned off")
	}
}

// allGates enables every feature.
type allGates struct{}

func (allGates) Enabled(clientfeatures.Feature) bool { return true }
