package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meshd-io/meshd/internal/election/testknobs"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/election"
)

// requestLog counts the requests a client sends, keyed by
// "<verb> <resource>" where verb is list (a streamed list included), watch,
// get, create or update, and the responses with a 5xx status.
type requestLog struct {
	mu           sync.Mutex
	counts       map[string]int
	serverErrors int
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.counts[requestKey(req)]++
		if err == nil && resp.StatusCode >= 500 {
			l.serverErrors++
		}
		return resp, err
	})
}

func (l *requestLog) get(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[key]
}

func (l *requestLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprint(l.counts)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// requestKey names a request as "<verb> <resource>", resource being the
// path segment after the namespace (or the group version).
func requestKey(req *http.Request) string {
	segs := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if i := indexOf(segs, "namespaces"); i >= 0 && len(segs) > i+2 {
		segs = segs[i+2:]
	} else if len(segs) > 0 && segs[0] == "apis" && len(segs) > 3 {
		segs = segs[3:]
	} else if len(segs) > 2 {
		segs = segs[2:]
	}
	resource, named := segs[0], len(segs) > 1
	verb := map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete"}[req.Method]
	switch {
	case req.Method != http.MethodGet:
	case req.URL.Query().Get("watch") == "true" && req.URL.Query().Get("sendInitialEvents") == "true":
		verb = "list" // a streamed list
	case req.URL.Query().Get("watch") == "true":
		verb = "watch"
	case named:
		verb = "get"
	default:
		verb = "list"
	}
	key := verb + " " + resource
	if strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadata") {
		key += " (metadata)"
	}
	return key
}

func indexOf(segs []string, s string) int {
	for i, x := range segs {
		if x == s {
			return i
		}
	}
	return -1
}

// maxResumedWatches bounds the watches a shared watch may open in a test:
// the first, and resumptions after the server closed one.
const maxResumedWatches = 5

// countedClient is a clientset on c whose requests log counts.
func countedClient(t *testing.T, c *testcluster.Cluster) (kubernetes.Interface, *requestLog) {
	t.Helper()
	log := &requestLog{counts: map[string]int{}}
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 500, 500
	cfg.Wrap(log.wrap)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client, log
}

// runElections runs les until the test ends.
func runElections(t *testing.T, les []*election.LeaderElection) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, le := range les {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = le.RunContext(ctx)
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func TestTwoHundredElectionsOfOneProcessShareOneWatch(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	setDefaultRevision(t, c.Client, ns, "stable")
	client, log := countedClient(t, c)

	shared := election.NewShared()
	t.Run("run", func(t *testing.T) {
		const n = 200
		les := make([]*election.LeaderElection, n)
		for i := range les {
			var err error
			les[i], err = election.NewLeaseLeaderElection(ns, "p1", fmt.Sprintf("e%03d", i), "stable", client,
				opts(t, election.WithTTL(10*time.Second), election.WithShared(shared))...)
			if err != nil {
				t.Fatal(err)
			}
		}
		runElections(t, les)
		testutil.Eventually(t, time.Minute, testutil.Check("every election to settle", func() bool {
			for _, le := range les {
				if !le.IsLeader() {
					return false
				}
			}
			return true
		}))
		// One list per resource, shared by every election. A server that
		// closes a watch whose reader fell behind during the burst of
		// creates makes the shared watch resume from the version it had
		// reached: a few watches, none per election, and no new list.
		for _, resource := range []string{"leases", "mutatingwebhookconfigurations"} {
			if got := log.get("list " + resource); got != 1 {
				t.Errorf("%d elections listed %s %d times, want 1 (requests: %v)", n, resource, got, log)
			}
			if got := log.get("watch " + resource); got > maxResumedWatches {
				t.Errorf("%d elections opened %d watches of %s, want at most %d (requests: %v)", n, got, resource, maxResumedWatches, log)
			}
		}
		if got := log.get("get leases"); got != 0 {
			t.Errorf("%d elections of free locks read them %d times, want 0: the shared watch has listed them", n, got)
		}
		if got := log.get("create leases"); got != n {
			t.Errorf("%d elections created %d Leases", n, got)
		}
		if log.serverErrors != 0 {
			t.Errorf("%d responses 5xx", log.serverErrors)
		}
	})
	if got := testknobs.SharedActivity(shared); got != (testknobs.Activity{}) {
		t.Errorf("%+v still run after every election stopped, want nothing", got)
	}
}

func TestConfigMapLocksFollowMetadataAndKeepDataAcrossATakeover(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	const n = 10
	ctx := context.Background()
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%02d", i), Namespace: ns,
			Annotations: map[string]string{"keep": "me"}}, Data: map[string]string{"config": "precious"}}
		if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// build makes the elections of one process, which share one Shared.
	build := func(t *testing.T, identity string, client kubernetes.Interface) []*election.LeaderElection {
		les := make([]*election.LeaderElection, n)
		shared := election.NewShared()
		for i := range les {
			var err error
			les[i], err = election.NewLeaderElection(ns, identity, fmt.Sprintf("cm%02d", i), "stable", client,
				opts(t, election.WithShared(shared))...)
			if err != nil {
				t.Fatal(err)
			}
		}
		return les
	}
	clientB, logB := countedClient(t, c)
	var b []*election.LeaderElection
	_ = b
	t.Run("run", func(t *testing.T) {
		clientA, logA := countedClient(t, c)
		a := build(t, "a", clientA)
		b = build(t, "b", clientB)
		outer := t
		t.Run("a", func(t *testing.T) {
			runElections(t, a)
			testutil.Eventually(t, 30*time.Second, testutil.Check("a to lead every election", func() bool {
				for _, le := range a {
					if !le.IsLeader() {
						return false
					}
				}
				return true
			}))
			runElections(outer, b)
			testutil.Eventually(t, 10*time.Second, testutil.Check("b to know every leader", func() bool {
				for _, le := range b {
					if le.Status().Holder != "a" {
						return false
					}
				}
				return true
			}))
		}) // a releases every lock on the way out
		for _, log := range []*requestLog{logA, logB} {
			lists, watches := log.get("list configmaps (metadata)"), log.get("watch configmaps (metadata)")
			if lists != 1 || watches < 1 || watches > maxResumedWatches || log.get("watch configmaps")+log.get("list configmaps") != 0 {
				t.Errorf("%d elections sent %d metadata-only ConfigMap lists and %d watches, want 1 list, 1 to %d watches and no other (requests: %v)",
					n, lists, watches, maxResumedWatches, log)
			}
		}
		testutil.Eventually(t, 10*time.Second, testutil.Check("b to take over every election", func() bool {
			for _, le := range b {
				if !le.IsLeader() {
					return false
				}
			}
			return true
		}))
		for i := range n {
			rec, cm := configMapRecord(t, c.Client, ns, fmt.Sprintf("cm%02d", i))
			if rec.HolderIdentity != "b" || cm.Data["config"] != "precious" || cm.Annotations["keep"] != "me" {
				t.Fatalf("cm%02d after the takeover: record %+v, data %v, annotations %v", i, rec, cm.Data, cm.Annotations)
			}
		}
	})
}
