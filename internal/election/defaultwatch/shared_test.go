package defaultwatch

import (
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// webhookResource names the resource of the default-revision webhook in
// a fake clientset's recorded requests.
const webhookResource = "mutatingwebhookconfigurations"

func TestSharedWatchersOfOneClientShareOneWatch(t *testing.T) {
	defer goleak.VerifyNone(t)
	client := fake.NewClientset(webhook("istio-revision-tag-default", rev("canary")))
	other := fake.NewClientset()
	shared := NewSharedWatchers()
	t.Run("run", func(t *testing.T) { runSharedWatchers(t, shared, client, other) })
	if got := shared.Running(); got != 0 {
		t.Fatalf("%d shared watches run after every user stopped", got)
	}
}

func runSharedWatchers(t *testing.T, shared *SharedWatchers, client, other *fake.Clientset) {
	const name = "istio-revision-tag-default"
	const n = 30
	recs := make([]*recorder, n)
	for i := range recs {
		recs[i] = &recorder{}
		w, err := shared.Watcher(client, revisions.Options{})
		if err != nil {
			t.Fatal(err)
		}
		w.AddHandler(recs[i].handler(""))
		start(t, w)
		if got := w.GetDefault(); got != "canary" {
			t.Fatalf("watcher %d: GetDefault() = %q once synced, want canary", i, got)
		}
	}
	// A watcher of another label, and one of another client, are not shared.
	for _, c := range []struct {
		client *fake.Clientset
		opts   revisions.Options
	}{{client, revisions.Options{RevisionLabel: "example.com/rev"}}, {other, revisions.Options{}}} {
		w, err := shared.Watcher(c.client, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		start(t, w)
	}
	if got := shared.Running(); got != 3 {
		t.Fatalf("%d shared watches run, want 3 (two labels on one client, one on another)", got)
	}
	// One list and one watch per label.
	kubetest.WaitForVerbs(t, client, webhookResource, map[string]int{"list": 2, "watch": 2})

	webhooks{t, client}.update(name, rev("stable"), nil)
	// The first watcher saw the initial "canary" (it joined before the
	// list); later ones joined after it. Every one sees the change.
	recs[0].waitCalls(t, "canary", "stable")
	for _, r := range recs[1:] {
		r.waitCalls(t, "stable")
	}
}

func TestSharedDefaultWatcherStopsWithItsLastUserAndRestarts(t *testing.T) {
	defer goleak.VerifyNone(t)
	client := fake.NewClientset()
	shared := NewSharedWatchers()
	for round := range 3 {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range 10 {
			w, err := shared.Watcher(client, revisions.Options{})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.Run(stop)
			}()
		}
		// Every watcher joins before stop closes: one that joined after the
		// last one left would start a watch of its own.
		waitUntil(t, "every watcher to join the shared watch", func() bool { return shared.users() == 10 })
		close(stop)
		wg.Wait()
		if got := shared.Running(); got != 0 {
			t.Fatalf("round %d: %d shared watches run after every user stopped", round, got)
		}
	}
	if got := kubetest.CountVerbs(client, webhookResource); got["watch"] > 3 {
		t.Fatalf("30 watchers in 3 rounds opened %d watches, want at most one per round", got["watch"])
	}
}

// users is the number of watchers in s's shared watches.
func (s *SharedWatchers) users() int { return s.entries.Users() }

func TestSharedDefaultWatcherRejectsBadOptions(t *testing.T) {
	_, err := NewSharedWatchers().Watcher(fake.NewClientset(), revisions.Options{WebhookName: "Not_Valid", RevisionLabel: "bad label"})
	if err == nil {
		t.Fatal("bad options were accepted")
	}
	for _, field := range []string{"WebhookName", "RevisionLabel"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %s", err, field)
		}
	}
	if _, err := NewSharedWatchers().Watcher(nil, revisions.Options{}); err == nil {
		t.Fatal("a nil client was accepted")
	}
	var unbuilt *SharedWatchers
	if _, err := unbuilt.Watcher(fake.NewClientset(), revisions.Options{}); err == nil {
		t.Fatal("a nil SharedWatchers built a watcher")
	}
	if _, err := new(SharedWatchers).Watcher(fake.NewClientset(), revisions.Options{}); err == nil {
		t.Fatal("a zero SharedWatchers built a watcher")
	}
}

// TestTwoSharedWatchersNeverShareAWatch: watchers of the same client and
// webhook built by two SharedWatchers (two programs, or two worlds of a
// test, in one process) each read a watch of their own and stop apart.
func TestTwoSharedWatchersNeverShareAWatch(t *testing.T) {
	defer goleak.VerifyNone(t)
	client := fake.NewClientset(webhook("istio-revision-tag-default", rev("canary")))
	a, b := NewSharedWatchers(), NewSharedWatchers()
	wa, err := a.Watcher(client, revisions.Options{})
	if err != nil {
		t.Fatal(err)
	}
	wb, err := b.Watcher(client, revisions.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stopA, stopB := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { wa.Run(stopA) })
	wg.Go(func() { wb.Run(stopB) })
	waitUntil(t, "both watchers to sync", func() bool { return wa.HasSynced() && wb.HasSynced() })
	if a.Running() != 1 || b.Running() != 1 {
		t.Fatalf("running watches %d and %d, want one each", a.Running(), b.Running())
	}
	// Two SharedWatchers: a list and a watch each.
	kubetest.WaitForVerbs(t, client, webhookResource, map[string]int{"list": 2, "watch": 2})
	close(stopA)
	waitUntil(t, "the first watch to stop", func() bool { return a.Running() == 0 })
	if b.Running() != 1 || wb.GetDefault() != "canary" {
		t.Fatalf("stopping one world's watcher stopped the other's (running %d, default %q)", b.Running(), wb.GetDefault())
	}
	close(stopB)
	wg.Wait()
	if b.Running() != 0 {
		t.Fatalf("%d watches still run", b.Running())
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
