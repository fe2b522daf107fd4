package election

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/testing/kubetest"
)

// stuck is a checkable whose answer the test sets.
type stuck struct {
	id  string
	err error
	got time.Duration // the tolerance it was asked with
}

func (s *stuck) electionID() string { return s.id }
func (s *stuck) Check(tolerance time.Duration) error {
	s.got = tolerance
	return s.err
}

func TestHealthzAdaptor(t *testing.T) {
	le, err := New(kubetest.NewClientset(), Spec{Namespace: "mesh", ElectionID: "my-controller-leader", Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	bad := &stuck{id: "meshd-status-leader"}
	h := newHealthzAdaptor(5*time.Second, append(NewHealthzAdaptor(0, le, nil).elections, bad)...)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	get := func() (int, string) {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	// A follower that never ran, and a healthy leader: ok.
	if code, body := get(); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("healthy: %d %q", code, body)
	}
	var checker func(*http.Request) error = h.Check // controller-runtime's healthz.Checker
	if err := checker(nil); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if bad.got != 5*time.Second {
		t.Errorf("checked with tolerance %v, want 5s", bad.got)
	}

	bad.err = errors.New("lease not renewed for 40s")
	code, body := get()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "election meshd-status-leader: lease not renewed for 40s") {
		t.Fatalf("stuck: %d %q", code, body)
	}
	if err := h.Check(httptest.NewRequest(http.MethodGet, "/healthz", nil)); err == nil || !strings.Contains(err.Error(), "meshd-status-leader") {
		t.Fatalf("Check: %v", err)
	}
	if NewHealthzAdaptor(-time.Second).tolerance != 0 {
		t.Error("a negative tolerance is not taken as 0")
	}
}
