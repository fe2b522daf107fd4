package features

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-multierror"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// env is a lookup function over a fixed map that counts its calls.
type env struct {
	mu    sync.Mutex
	vars  map[string]string
	calls atomic.Int32
}

func newEnv(kv ...string) *env {
	e := &env{vars: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		e.vars[kv[i]] = kv[i+1]
	}
	return e
}

func (e *env) lookup(name string) (string, bool) {
	e.calls.Add(1)
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.vars[name]
	return v, ok
}

func (e *env) set(name, value string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.vars[name] = value
}

// parseCase is one variable value and what the flag must end up with.
type parseCase struct {
	name    string
	set     bool   // whether the variable is present
	raw     string // its value
	want    string // formatted value in effect
	problem bool   // whether the value is rejected
}

func runParseCases(t *testing.T, cases []parseCase, add func(r *Registry) (get func() string)) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			if tc.set {
				e.set("X", tc.raw)
			}
			r := newRegistry(e.lookup)
			get := add(r)
			if got := get(); got != tc.want {
				t.Errorf("Get() = %q, want %q", got, tc.want)
			}
			infos := r.All()
			if len(infos) != 1 || infos[0].IsSet != tc.set || infos[0].Value != tc.want {
				t.Errorf("All() = %+v, want IsSet=%v Value=%q", infos, tc.set, tc.want)
			}
			err := r.Validate()
			if !tc.problem {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want a problem")
			}
			var ve *valueError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate() = %T %v, want a *valueError inside", err, err)
			}
			if ve.Name != "X" || ve.Value != tc.raw || ve.Default != infos[0].Default {
				t.Errorf("valueError = %+v", ve)
			}
			msg := ve.Error()
			for _, part := range []string{"X", fmt.Sprintf("%q", tc.raw), fmt.Sprintf("default %q", infos[0].Default)} {
				if !strings.Contains(msg, part) {
					t.Errorf("message %q does not contain %s", msg, part)
				}
			}
		})
	}
}

func TestParseBool(t *testing.T) {
	cases := []parseCase{
		{name: "unset", want: "true"},
		{name: "empty", set: true, raw: "", want: "true"},
		{name: "false", set: true, raw: "false", want: "false"},
		{name: "FALSE", set: true, raw: "FALSE", want: "false"},
		{name: "0", set: true, raw: "0", want: "false"},
		{name: "1", set: true, raw: "1", want: "true"},
		{name: "spaces", set: true, raw: " false\n", want: "false"},
		{name: "maybe", set: true, raw: "maybe", want: "true", problem: true},
		{name: "yes", set: true, raw: "yes", want: "true", problem: true},
		{name: "fAlSe", set: true, raw: "fAlSe", want: "true", problem: true},
	}
	runParseCases(t, cases, func(r *Registry) func() string {
		f := register(r, "X", true, "a bool")
		return func() string { return fmt.Sprint(f.Get()) }
	})
}

func TestParseString(t *testing.T) {
	cases := []parseCase{
		{name: "unset", want: "configmap"},
		{name: "empty", set: true, raw: "", want: "configmap"},
		{name: "lease", set: true, raw: "lease", want: "lease"},
		{name: "not trimmed", set: true, raw: "lease ", want: "configmap", problem: true},
		{name: "not allowed", set: true, raw: "Lease", want: "configmap", problem: true},
	}
	runParseCases(t, cases, func(r *Registry) func() string {
		f := register(r, "X", "configmap", "a lock", oneOf("configmap", "lease"))
		return f.Get
	})

	free := []parseCase{
		{name: "verbatim", set: true, raw: " a b ", want: " a b "},
		{name: "unicode", set: true, raw: "ünïcode", want: "ünïcode"},
	}
	runParseCases(t, free, func(r *Registry) func() string {
		return register(r, "X", "", "free text").Get
	})
}

func TestParseDuration(t *testing.T) {
	cases := []parseCase{
		{name: "unset", want: "30s"},
		{name: "empty", set: true, raw: "", want: "30s"},
		{name: "seconds", set: true, raw: "10s", want: "10s"},
		{name: "compound", set: true, raw: "1m30s", want: "1m30s"},
		{name: "spaces", set: true, raw: " 2s ", want: "2s"},
		{name: "negative", set: true, raw: "-3s", want: "30s", problem: true},
		{name: "zero", set: true, raw: "0s", want: "30s", problem: true},
		{name: "no unit", set: true, raw: "30", want: "30s", problem: true},
		{name: "garbage", set: true, raw: "abc", want: "30s", problem: true},
		{name: "overflow", set: true, raw: "999999999999h", want: "30s", problem: true},
		{name: "below validator minimum", set: true, raw: "500ms", want: "30s", problem: true},
	}
	runParseCases(t, cases, func(r *Registry) func() string {
		f := register(r, "X", 30*time.Second, "a ttl", withValidator(func(d time.Duration) error {
			if d < time.Second {
				return errors.New("must be at least 1s")
			}
			return nil
		}))
		return func() string { return f.Get().String() }
	})
}

func TestParseInt(t *testing.T) {
	cases := []parseCase{
		{name: "unset", want: "3"},
		{name: "empty", set: true, raw: "", want: "3"},
		{name: "positive", set: true, raw: "42", want: "42"},
		{name: "negative", set: true, raw: "-7", want: "-7"},
		{name: "plus sign", set: true, raw: "+5", want: "5"},
		{name: "spaces", set: true, raw: "\t9 ", want: "9"},
		{name: "float", set: true, raw: "1.5", want: "3", problem: true},
		{name: "hex", set: true, raw: "0x10", want: "3", problem: true},
		{name: "overflow", set: true, raw: "99999999999999999999999", want: "3", problem: true},
		{name: "words", set: true, raw: "three", want: "3", problem: true},
	}
	runParseCases(t, cases, func(r *Registry) func() string {
		f := register(r, "X", 3, "a count")
		return func() string { return fmt.Sprint(f.Get()) }
	})
}

func TestReadOnce(t *testing.T) {
	e := newEnv("B", "false", "D", "10s")
	r := newRegistry(e.lookup)
	b := register(r, "B", true, "")
	d := register(r, "D", time.Second, "")
	if e.calls.Load() != 0 {
		t.Fatalf("registration read the environment %d times", e.calls.Load())
	}

	if b.Get() != false || d.Get() != 10*time.Second {
		t.Fatalf("first Get: %v %v", b.Get(), d.Get())
	}
	e.set("B", "true")
	e.set("D", "bad")
	for range 3 {
		if b.Get() != false || d.Get() != 10*time.Second {
			t.Fatalf("Get after changing the environment: %v %v", b.Get(), d.Get())
		}
	}
	if err := r.Validate(); err != nil {
		t.Fatalf("Validate after changing the environment: %v", err)
	}
	r.All()
	if got := e.calls.Load(); got != 2 {
		t.Fatalf("lookup called %d times, want once per flag (2)", got)
	}
}

func TestConcurrentGet(t *testing.T) {
	e := newEnv("I", "7")
	r := newRegistry(e.lookup)
	f := register(r, "I", 1, "")
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if f.Get() != 7 {
				t.Error("wrong value")
			}
			r.All()
			_ = r.Validate()
		})
	}
	wg.Wait()
	if e.calls.Load() != 1 {
		t.Fatalf("lookup called %d times, want 1", e.calls.Load())
	}
}

func TestValidateCollectsAll(t *testing.T) {
	e := newEnv(
		"ENABLE", "maybe",
		"TTL", "-3s",
		"COUNT", "x",
		"LOCK", "etcd",
		"GOOD", "5s",
	)
	r := newRegistry(e.lookup)
	register(r, "ENABLE", true, "")
	register(r, "TTL", 30*time.Second, "")
	register(r, "COUNT", 1, "")
	register(r, "LOCK", "configmap", "", oneOf("configmap", "lease"))
	register(r, "GOOD", time.Second, "")

	err := r.Validate()
	var me *multierror.Error
	if !errors.As(err, &me) {
		t.Fatalf("Validate() = %T %v, want *multierror.Error", err, err)
	}
	var names []string
	for _, e := range me.Errors {
		var ve *valueError
		if !errors.As(e, &ve) {
			t.Fatalf("%T %v is not a *valueError", e, e)
		}
		names = append(names, ve.Name)
	}
	if got, want := strings.Join(names, ","), "COUNT,ENABLE,LOCK,TTL"; got != want {
		t.Errorf("problems for %s, want %s (sorted, all of them)", got, want)
	}
	msg := err.Error()
	for _, part := range []string{`ENABLE="maybe"`, `default "true"`, `TTL="-3s"`, `default "30s"`, `COUNT="x"`, `LOCK="etcd"`, `"configmap", "lease"`} {
		if !strings.Contains(msg, part) {
			t.Errorf("Validate message lacks %s:\n%s", part, msg)
		}
	}
	if strings.Contains(msg, "GOOD") {
		t.Errorf("Validate reports a valid flag:\n%s", msg)
	}
}

func TestWarningLogged(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	r := newRegistry(newEnv("ENABLE_LEADER_ELECTION", "maybe").lookup)
	r.SetLogger(zap.New(core))
	// Another registry's logger, and the Default one's, are not this one's.
	newRegistry(nil).SetLogger(zap.NewNop())
	Default().SetLogger(zap.NewNop())
	t.Cleanup(func() { Default().SetLogger(nil) })

	f := register(r, "ENABLE_LEADER_ELECTION", true, "")
	f.Get()
	f.Get()
	_ = r.Validate()

	entries := logs.All()
	if len(entries) != 1 {
		t.Fatalf("got %d warnings, want exactly 1", len(entries))
	}
	fields := entries[0].ContextMap()
	if fields["name"] != "ENABLE_LEADER_ELECTION" || fields["value"] != "maybe" || fields["default"] != "true" {
		t.Errorf("warning fields = %v", fields)
	}
}

func TestAll(t *testing.T) {
	e := newEnv("B_BOOL", "false", "C_DUR", "nope")
	r := newRegistry(e.lookup)
	register(r, "C_DUR", 2*time.Minute, "dur")
	register(r, "D_STR", "x", "str")
	register(r, "B_BOOL", true, "bool")
	register(r, "A_INT", -1, "int")

	want := []FlagInfo{
		{Name: "A_INT", Type: "int", Default: "-1", Value: "-1", Description: "int"},
		{Name: "B_BOOL", Type: "bool", Default: "true", Value: "false", IsSet: true, Description: "bool"},
		{Name: "C_DUR", Type: "duration", Default: "2m0s", Value: "2m0s", IsSet: true, Description: "dur"},
		{Name: "D_STR", Type: "string", Default: "x", Value: "x", Description: "str"},
	}
	got := r.All()
	if len(got) != len(want) {
		t.Fatalf("All() = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("All()[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestRegisterTwice(t *testing.T) {
	e := newEnv("N", "4")
	r := newRegistry(e.lookup)
	a := register(r, "N", 1, "first")
	b := register(r, "N", 1, "second")
	if a != b {
		t.Fatal("identical registration returned a different flag")
	}
	if a.Get() != 4 || b.Get() != 4 || e.calls.Load() != 1 {
		t.Fatal("identical registrations do not share the value")
	}
	if got := r.All(); len(got) != 1 || got[0].Description != "first" {
		t.Fatalf("All() = %+v, want the first registration only", got)
	}

	mustPanic(t, "different default", func() { register(r, "N", 2, "") })
	mustPanic(t, "different type", func() { register(r, "N", "1", "") })
	mustPanic(t, "bool over int", func() { register(r, "N", false, "") })
}

func TestRegisterProgrammingErrors(t *testing.T) {
	r := newRegistry(newEnv().lookup)
	mustPanic(t, "empty name", func() { register(r, "", true, "") })
	mustPanic(t, "name with dash", func() { register(r, "A-B", true, "") })
	mustPanic(t, "leading digit", func() { register(r, "1A", true, "") })
	mustPanic(t, "zero duration default", func() { register(r, "D", time.Duration(0), "") })
	mustPanic(t, "negative duration default", func() { register(r, "D", -time.Second, "") })
	mustPanic(t, "default rejected by validator", func() { register(r, "S", "etcd", "", oneOf("configmap", "lease")) })
	if len(r.All()) != 0 {
		t.Fatal("a panicking registration left a flag behind")
	}
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", what)
		}
	}()
	f()
}

// TestDefaultRegistry checks the project's flags. meshd's TestEnvDocIsCurrent
// keeps their documentation, docs/env.md, in step.
func TestDefaultRegistry(t *testing.T) {
	checks := []struct {
		name, typ, def string
		got            FlagInfo
	}{
		{"ENABLE_LEADER_ELECTION", "bool", "true", staticInfo(EnableLeaderElection.s)},
		{"PRIORITIZED_LEADER_ELECTION", "bool", "true", staticInfo(prioritizedLeaderElection.s)},
		{"LEADER_ELECTION_TTL", "duration", "30s", staticInfo(LeaderElectionTTL.s)},
		{"PRIORITIZED_LEADER_ELECTION_LOCK", "string", "configmap", staticInfo(prioritizedLeaderElectionLock.s)},
		{"DEFAULT_REVISION_WEBHOOK", "string", "", staticInfo(defaultRevisionWebhook.s)},
		{"REVISION_LABEL", "string", "istio.io/rev", staticInfo(revisionLabel.s)},
		{"LEADER_ELECTION_STOP_TIMEOUT", "duration", "5s", staticInfo(LeaderElectionStopTimeout.s)},
		{"LEADER_ELECTION_RELEASE_ON_CANCEL", "bool", "true", staticInfo(leaderElectionReleaseOnCancel.s)},
		{"LEADER_ELECTION_WATCH", "bool", "true", staticInfo(leaderElectionWatch.s)},
		{"LEADER_ELECTION_HANDOVER", "bool", "true", staticInfo(leaderElectionHandover.s)},
		{"LEADER_ELECTION_HANDOVER_GRACE", "duration", "10s", staticInfo(leaderElectionHandoverGrace.s)},
		{"LEADER_ELECTION_MODE", "string", "racing", staticInfo(leaderElectionMode.s)},
		{"LEADER_ELECTION_SESSIONS", "bool", "false", staticInfo(leaderElectionSessions.s)},
		{"POD_NAME", "string", "", staticInfo(podName.s)},
		{"POD_NAMESPACE", "string", "", staticInfo(podNamespace.s)},
		{"POD_UID", "string", "", staticInfo(podUID.s)},
		{"CONTAINER_NAME", "string", "", staticInfo(containerName.s)},
	}
	for _, c := range checks {
		if c.got.Name != c.name || c.got.Type != c.typ || c.got.Default != c.def || c.got.Description == "" {
			t.Errorf("%s: got %+v, want type %s default %q and a description", c.name, c.got, c.typ, c.def)
		}
	}
	if got := len(Default().sorted()); got != len(checks) {
		t.Errorf("default registry has %d flags, the test knows %d", got, len(checks))
	}
}

func staticInfo(e entry) FlagInfo { return e.static() }

func TestProjectFlagValidators(t *testing.T) {
	// The validators of flags.go, exercised on a private registry through the
	// same registration calls' options.
	ttl := LeaderElectionTTL.s
	for raw, ok := range map[string]bool{"1s": true, "30s": true, "999ms": false, "-3s": false} {
		v, err := ttl.parse(raw)
		if err == nil {
			err = ttl.validate(v)
		}
		if (err == nil) != ok {
			t.Errorf("LEADER_ELECTION_TTL=%s: err=%v, want ok=%v", raw, err, ok)
		}
	}
	lock := prioritizedLeaderElectionLock.s
	for raw, ok := range map[string]bool{"configmap": true, "lease": true, "Lease": false, "endpoints": false} {
		if err := lock.validate(raw); (err == nil) != ok {
			t.Errorf("PRIORITIZED_LEADER_ELECTION_LOCK=%s: err=%v, want ok=%v", raw, err, ok)
		}
	}
}
