package integration

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/election/fence"
)

// stallable lets a test stall every new request of a client, as a process
// pause (or a partition) stalls an elector: requests wait until resumed or
// until their context ends. Streams already open go on.
type stallable struct {
	rt http.RoundTripper

	mu      sync.Mutex
	stalled chan struct{} // closed on resume; nil while running
}

func (s *stallable) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	stalled := s.stalled
	s.mu.Unlock()
	if stalled != nil {
		select {
		case <-stalled:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return s.rt.RoundTrip(req)
}

func (s *stallable) stall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stalled == nil {
		s.stalled = make(chan struct{})
	}
}

func (s *stallable) resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stalled != nil {
		close(s.stalled)
		s.stalled = nil
	}
}

func stallableClient(t *testing.T, c *testcluster.Cluster) (kubernetes.Interface, *stallable) {
	t.Helper()
	s := &stallable{}
	cfg := rest.CopyConfig(c.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { s.rt = rt; return s })
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.resume)
	return client, s
}

// TestFencedWriteOfAPausedLeaderIsRefused: leader a writes an object fenced
// by its term, then pauses past its lease (its elector's requests stall and
// its work waits). b takes over and writes the object. When a resumes, its
// write, made in its old term, is refused, and b's data stays.
func TestFencedWriteOfAPausedLeaderIsRefused(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	ctx := context.Background()
	cms := c.Client.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "work"}, Data: map[string]string{}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	own := func(owner string) func(*corev1.ConfigMap) error {
		return func(cm *corev1.ConfigMap) error {
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data["owner"] = owner
			return nil
		}
	}

	electorClient, pause := stallableClient(t, c)
	le, err := election.NewLeaderElection(ns, "a", election.IngressController, "stable", electorClient, opts(t)...)
	wrote, resume, lateWrite := make(chan error, 1), make(chan struct{}), make(chan error, 1)
	var aTerm election.Term // set before wrote is sent to
	if err == nil {
		le.Add(func(ctx context.Context) error {
			aTerm, _ = election.TermFrom(ctx)
			_, err := fence.Update(ctx, cms, "work", own("a"))
			wrote <- err
			<-resume // paused: a's process does not see its term end
			// It resumes before it notices the cancellation: the write goes
			// out in the old term.
			_, err = fence.Update(context.WithoutCancel(ctx), cms, "work", own("a, late"))
			lateWrite <- err
			return nil
		})
	}
	a := newInstance(t, "a", le, err)
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatalf("a's first write: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a did not lead and write")
	}
	pause.stall()

	le, err = election.NewLeaderElection(ns, "b", election.IngressController, "stable", c.Client, opts(t)...)
	bWrote := make(chan error, 1)
	if err == nil {
		le.Add(func(ctx context.Context) error {
			_, err := fence.Update(ctx, cms, "work", own("b"))
			bWrote <- err
			<-ctx.Done()
			return nil
		})
	}
	b := newInstance(t, "b", le, err)
	select {
	case err := <-bWrote:
		if err != nil {
			t.Fatalf("b's write: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("b did not take over from the paused leader")
	}

	close(resume)
	select {
	case err = <-lateWrite:
	case <-time.After(15 * time.Second):
		t.Fatal("the paused leader's late write did not finish")
	}
	if !errors.Is(err, fence.ErrStaleTerm) {
		t.Fatalf("the paused leader's late write: %v, want ErrStaleTerm", err)
	}
	t.Logf("refused: %v", err)
	cm, err := cms.Get(ctx, "work", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["owner"] != "b" {
		t.Fatalf("owner = %q, want b's write to stay", cm.Data["owner"])
	}
	if rec, _ := configMapRecord(t, c.Client, ns, election.IngressController); rec.HolderIdentity != "b" || rec.LeaderTransitions != aTerm.Transitions+1 {
		t.Fatalf("lock record %+v; a's term was %d", rec, aTerm.Transitions)
	}
	pause.resume()
	a.stop()
	b.stop()
}
