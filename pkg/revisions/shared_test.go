package revisions

import (
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/kubernetes/fake"
)

// webhookVerbs counts the clientset's webhook requests by verb.
func webhookVerbs(c *fake.Clientset) map[string]int {
	out := map[string]int{}
	for _, a := range c.Actions() {
		if a.GetResource().Resource == "mutatingwebhookconfigurations" {
			out[a.GetVerb()]++
		}
	}
	return out
}

func TestSharedDefaultWatchersOfOneClientShareOneWatch(t *testing.T) {
	defer goleak.VerifyNone(t)
	client := fake.NewClientset(webhook("istio-revision-tag-default", rev("canary")))
	other := fake.NewClientset()
	t.Run("run", func(t *testing.T) { runSharedWatchers(t, client, other) })
	if got := SharedDefaultWatchers(); got != 0 {
		t.Fatalf("%d shared watches run after every user stopped", got)
	}
}

func runSharedWatchers(t *testing.T, client, other *fake.Clientset) {
	const name = "istio-revision-tag-default"
	const n = 30
	recs := make([]*recorder, n)
	for i := range recs {
		recs[i] = &recorder{}
		w, err := SharedDefaultWatcher(client, Options{})
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
		opts   Options
	}{{client, Options{RevisionLabel: "example.com/rev"}}, {other, Options{}}} {
		w, err := SharedDefaultWatcher(c.client, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		start(t, w)
	}
	if got := SharedDefaultWatchers(); got != 3 {
		t.Fatalf("%d shared watches run, want 3 (two labels on one client, one on another)", got)
	}
	if got := webhookVerbs(client); got["list"] != 2 || got["watch"] != 2 {
		t.Fatalf("requests %v, want one list and one watch per label", got)
	}

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
	for round := range 3 {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range 10 {
			w, err := SharedDefaultWatcher(client, Options{})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.Run(stop)
			}()
		}
		waitUntil(t, "the shared watch to start", func() bool { return SharedDefaultWatchers() == 1 })
		close(stop)
		wg.Wait()
		if got := SharedDefaultWatchers(); got != 0 {
			t.Fatalf("round %d: %d shared watches run after every user stopped", round, got)
		}
	}
	if got := webhookVerbs(client); got["watch"] > 3 {
		t.Fatalf("30 watchers in 3 rounds opened %d watches, want at most one per round", got["watch"])
	}
}

func TestSharedDefaultWatcherRejectsBadOptions(t *testing.T) {
	_, err := SharedDefaultWatcher(fake.NewClientset(), Options{WebhookName: "Not_Valid", RevisionLabel: "bad label"})
	if err == nil {
		t.Fatal("bad options were accepted")
	}
	for _, field := range []string{"WebhookName", "RevisionLabel"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %s", err, field)
		}
	}
	if _, err := SharedDefaultWatcher(nil, Options{}); err == nil {
		t.Fatal("a nil client was accepted")
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
