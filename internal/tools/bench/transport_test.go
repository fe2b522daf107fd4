package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		method, url, want string
	}{
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/x", VerbGet},
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases?fieldSelector=metadata.name%3Dx", VerbList},
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases?watch=true&fieldSelector=metadata.name%3Dx", VerbWatch},
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases?sendInitialEvents=true&watch=1", VerbWatch},
		{"GET", "/api/v1/namespaces/ns/configmaps/x", VerbGet},
		{"GET", "/api/v1/namespaces/ns/configmaps", VerbList},
		{"GET", "/api/v1/namespaces/ns", VerbGet},
		{"GET", "/api/v1/namespaces", VerbList},
		{"GET", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", VerbList},
		{"GET", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/w", VerbGet},
		{"GET", "/version", VerbGet},
		{"POST", "/apis/coordination.k8s.io/v1/namespaces/ns/leases", VerbCreate},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/x", VerbUpdate},
		{"PATCH", "/api/v1/namespaces/ns/events/e", VerbPatch},
		{"DELETE", "/api/v1/namespaces/ns/configmaps/x", VerbDelete},
	} {
		req := httptest.NewRequest(tc.method, tc.url, nil)
		if got := classify(req); got != tc.want {
			t.Errorf("%s %s = %s, want %s", tc.method, tc.url, got, tc.want)
		}
	}
}

type fixedRT int

func (s fixedRT) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: int(s)}, nil
}

func TestCounterCountsAndLastWrite(t *testing.T) {
	c := NewCounter()
	ok := &countingRoundTripper{c: c, next: fixedRT(200)}
	conflict := &countingRoundTripper{c: c, next: fixedRT(409)}
	_, _ = ok.RoundTrip(httptest.NewRequest("GET", "/api/v1/namespaces/ns/configmaps/x", nil))
	if !c.LastWrite().IsZero() {
		t.Fatal("a GET counted as a write")
	}
	_, _ = conflict.RoundTrip(httptest.NewRequest("PUT", "/api/v1/namespaces/ns/configmaps/x", nil))
	if !c.LastWrite().IsZero() {
		t.Fatal("a failed PUT counted as a write")
	}
	before := time.Now()
	_, _ = ok.RoundTrip(httptest.NewRequest("PUT", "/api/v1/namespaces/ns/configmaps/x", nil))
	if c.LastWrite().Before(before) {
		t.Fatal("a successful PUT was not recorded")
	}
	got := c.Snapshot()
	if got[VerbGet] != 1 || got[VerbUpdate] != 2 || got.Total() != 3 {
		t.Fatalf("counts = %v", got)
	}
	if d := got.Sub(Counts{VerbUpdate: 2}); d.Total() != 1 || d[VerbGet] != 1 {
		t.Fatalf("Sub = %v", d)
	}
}

func TestCounterFirstUpdateAfter(t *testing.T) {
	c := NewCounter()
	ok := &countingRoundTripper{c: c, next: fixedRT(200)}
	conflict := &countingRoundTripper{c: c, next: fixedRT(409)}
	put := func(rt http.RoundTripper) {
		_, _ = rt.RoundTrip(httptest.NewRequest("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/x", nil))
	}
	put(ok)
	mark := time.Now()
	if _, found := c.FirstUpdateAfter(mark); found {
		t.Fatal("an update before the mark was found")
	}
	_, _ = ok.RoundTrip(httptest.NewRequest("POST", "/api/v1/namespaces/ns/events", nil))
	put(conflict)
	if _, found := c.FirstUpdateAfter(mark); found {
		t.Fatal("a create or a failed update counted as an update")
	}
	put(ok)
	first, found := c.FirstUpdateAfter(mark)
	if !found || !first.After(mark) {
		t.Fatalf("FirstUpdateAfter = %v, %v", first, found)
	}
	for i := 0; i < 2*maxRecentUpdates; i++ {
		put(ok)
	}
	if got, _ := c.FirstUpdateAfter(mark); !got.After(first) {
		t.Fatal("the oldest updates were not dropped")
	}
	if n := len(c.updates); n != maxRecentUpdates {
		t.Fatalf("%d update times kept, want %d", n, maxRecentUpdates)
	}
}

// cancelledRT answers nothing: it waits for the request's context to end,
// as a request in flight when its process is cancelled.
type cancelledRT struct{}

func (cancelledRT) RoundTrip(req *http.Request) (*http.Response, error) {
	<-req.Context().Done()
	return nil, req.Context().Err()
}

func TestCounterKnowsAWriteCancelledInFlightMayHaveLanded(t *testing.T) {
	c := NewCounter()
	ok := &countingRoundTripper{c: c, next: fixedRT(200)}
	inFlight := &countingRoundTripper{c: c, next: cancelledRT{}}
	cancelled := func(method string) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequest(method, "/apis/coordination.k8s.io/v1/namespaces/ns/leases/x", nil).WithContext(ctx)
		_, _ = inFlight.RoundTrip(req)
	}
	cancelled("GET")
	if c.WriteUnknownSince() {
		t.Fatal("a cancelled GET counted as a write of unknown outcome")
	}
	_, _ = ok.RoundTrip(httptest.NewRequest("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/x", nil))
	if c.WriteUnknownSince() {
		t.Fatal("a write of unknown outcome reported after a successful write and nothing else")
	}
	last := c.LastWrite()
	cancelled("PUT")
	if !c.WriteUnknownSince() {
		t.Fatal("an update cancelled in flight after the last successful write was not reported")
	}
	if !c.LastWrite().Equal(last) {
		t.Fatal("an update cancelled in flight was recorded as a successful write")
	}
	_, _ = ok.RoundTrip(httptest.NewRequest("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/x", nil))
	if c.WriteUnknownSince() {
		t.Fatal("a successful write after the cancelled one did not settle it")
	}
	if n := c.ServerErrors(); n != 0 {
		t.Fatalf("%d server errors counted for requests cancelled by their caller", n)
	}
}
