package status

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/internal/controllers/revision"
	"github.com/meshd-io/meshd/internal/election/priority"
	"github.com/meshd-io/meshd/internal/lockstatus"
	"github.com/meshd-io/meshd/pkg/election"
)

func TestNewReportsEveryBadOption(t *testing.T) {
	_, err := New(nil, Options{
		MeshNamespace:        "Bad_NS",
		Revision:             "Not Valid",
		Interval:             -time.Second,
		PerRevisionElections: []string{"ok", ""},
	})
	if err == nil {
		t.Fatal("New accepted invalid options")
	}
	for _, want := range []string{"nil Kubernetes client", "Options.MeshNamespace", "Options.Identity", "Options.Revision",
		"Options.Interval", "Options.PerRevisionElections[1]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s:\n%v", want, err)
		}
	}
}

func TestNewDefaults(t *testing.T) {
	c, err := New(fake.NewClientset(), Options{MeshNamespace: "istio-system", Identity: "meshd-0"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "status" || c.opts.Revision != election.DefaultRevision || c.opts.Interval != DefaultInterval ||
		len(c.opts.PerRevisionElections) != 1 || c.opts.PerRevisionElections[0] != revision.ElectionID {
		t.Fatalf("defaults not applied: %+v", c.opts)
	}
	if c.heartbeat != 50*time.Second {
		t.Fatalf("heartbeat = %v", c.heartbeat)
	}
	c.Trigger() // not running: a no-op
}

func TestCompute(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 30, 0, time.UTC)
	live := now.Add(-10 * time.Second)
	lock := func(name string, kind election.LockKind, holder, key string, renew time.Time) lockstatus.Lock {
		c := priority.ParseKey(key)
		return lockstatus.Lock{Election: name, Kind: kind, Holder: holder, HolderKey: key, Revision: c.Revision,
			Remote: c.Remote, RenewTime: renew, LeaseDuration: 30 * time.Second}
	}
	locks := []lockstatus.Lock{
		lock("istio-leader", election.ConfigMapLock, "a", "canary", live),
		lock("istio-leader", election.LeaseLock, "b", "^stable", live),  // same name, other kind
		lock("meshd-revision-blue", election.LeaseLock, "c", "", live),  // per revision, no key
		lock("meshd-revision-x", election.ConfigMapLock, "d", "", live), // not a Lease: no revision
		lock("istio-status-leader", election.ConfigMapLock, "e", "old", now.Add(-time.Hour)),
		lock("released", election.ConfigMapLock, "", "gone", live),
		{Election: "broken", Kind: election.ConfigMapLock, Error: "bad"},
		lock("istio-analyze-leader", election.LeaseLock, "f", "default", live), // own revision again
	}
	s := compute(locks, now, "default", DefaultPerRevisionElections)
	if got := strings.Join(s.revisions, ","); got != "blue,canary,default,stable" {
		t.Errorf("revisions = %s", got)
	}
	var names []string
	for n := range s.leaders {
		names = append(names, n)
	}
	want := map[string]Leader{
		"istio-leader/ConfigMap": {Holder: "a", HolderKey: "canary", Lock: election.ConfigMapLock},
		"istio-leader/Lease":     {Holder: "b", HolderKey: "^stable", Lock: election.LeaseLock},
		"meshd-revision-blue":    {Holder: "c", Lock: election.LeaseLock},
		"meshd-revision-x":       {Holder: "d", Lock: election.ConfigMapLock},
		"istio-analyze-leader":   {Holder: "f", HolderKey: "default", Lock: election.LeaseLock},
	}
	if len(s.leaders) != len(want) {
		t.Fatalf("leaders = %v", names)
	}
	for name, w := range want {
		got, ok := s.leaders[name]
		if !ok || got.Holder != w.Holder || got.HolderKey != w.HolderKey || got.Lock != w.Lock {
			t.Errorf("leaders[%s] = %+v, want %+v", name, got, w)
		}
		if got.RenewTime != "2026-01-02T03:04:20Z" || got.ExpireTime != now.Add(20*time.Second).UTC().Format(time.RFC3339) {
			t.Errorf("leaders[%s] times = %s, %s", name, got.RenewTime, got.ExpireTime)
		}
	}

	data := s.data("meshd-0", now)
	if data[KeyRevisions] != "blue\ncanary\ndefault\nstable" || data[KeyUpdatedBy] != "meshd-0" ||
		data[KeyUpdateTime] != "2026-01-02T03:04:30Z" {
		t.Errorf("data = %v", data)
	}
	var decoded map[string]Leader
	if err := json.Unmarshal([]byte(data[KeyLeaders]), &decoded); err != nil || len(decoded) != len(want) {
		t.Errorf("leaders JSON %s: %v", data[KeyLeaders], err)
	}
}

func TestStale(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 30, 0, time.UTC)
	heartbeat := 55 * time.Second
	lock := lockstatus.Lock{Election: "istio-leader", Kind: election.ConfigMapLock, Holder: "a", HolderKey: "canary",
		Revision: "canary", RenewTime: now.Add(-5 * time.Second), LeaseDuration: 30 * time.Second}
	s := compute([]lockstatus.Lock{lock}, now, "default", nil)
	stored := s.data("me", now.Add(-10*time.Second))

	if s.stale(stored, "me", now, time.Time{}, heartbeat) {
		t.Error("unchanged status is stale")
	}
	renewed := lock
	renewed.RenewTime = now
	if compute([]lockstatus.Lock{renewed}, now, "default", nil).stale(stored, "me", now, time.Time{}, heartbeat) {
		t.Error("a renewal alone makes the status stale")
	}
	if !s.stale(stored, "other", now, time.Time{}, heartbeat) {
		t.Error("another writer is not stale")
	}
	if !s.stale(stored, "me", now.Add(heartbeat), time.Time{}, heartbeat) {
		t.Error("not stale after the heartbeat")
	}
	moved := lock
	moved.Holder = "b"
	if !compute([]lockstatus.Lock{moved}, now, "default", nil).stale(stored, "me", now, time.Time{}, heartbeat) {
		t.Error("a new holder is not stale")
	}
	if !compute(nil, now, "default", nil).stale(stored, "me", now, time.Time{}, heartbeat) {
		t.Error("a lost leader is not stale")
	}
	// The exact time of our own write beats the truncated stored one.
	fraction := now.Add(-10*time.Second + 900*time.Millisecond) // stored as now-10s
	if s.stale(stored, "me", fraction.Add(heartbeat-time.Millisecond), fraction, heartbeat) {
		t.Error("stale before the heartbeat since our own write")
	}
	if !s.stale(stored, "me", fraction.Add(heartbeat-time.Millisecond), time.Time{}, heartbeat) {
		t.Error("the truncated stored time is not used without our own write")
	}
	other := now.Add(-20 * time.Second) // our write, but not the stored one
	if !s.stale(stored, "me", now.Add(heartbeat-10*time.Second), other, heartbeat) {
		t.Error("our older write hides the stored time")
	}

	for _, key := range []string{KeyLeaders, KeyUpdateTime, KeyRevisions} {
		broken := map[string]string{}
		for k, v := range stored {
			broken[k] = v
		}
		broken[key] = "garbage"
		if !s.stale(broken, "me", now, time.Time{}, heartbeat) {
			t.Errorf("garbage in %s is not stale", key)
		}
	}
}
