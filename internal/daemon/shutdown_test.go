package daemon

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestShutdownDeadlineCutsHangingRequests(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fast" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		select { // an API server that does not answer
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	sd := NewShutdownDeadline()
	client := &http.Client{Transport: sd.WrapTransport(http.DefaultTransport)}
	get := func(path string) (string, error) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}

	// Before shutdown: untouched.
	if body, err := get("/fast"); err != nil || body != "ok" {
		t.Fatalf("before the deadline: %q, %v", body, err)
	}
	// A request hanging before shutdown begins ends at the deadline.
	errc := make(chan error, 1)
	go func() { _, err := get("/hang"); errc <- err }()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	sd.set(start.Add(200 * time.Millisecond))
	sd.set(start.Add(time.Hour)) // only the first deadline counts
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("the hanging request succeeded")
		}
		if took := time.Since(start); took < 150*time.Millisecond || took > 2*time.Second {
			t.Fatalf("request in flight ended after %v, want about 200ms", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request in flight was not cut at the deadline")
	}
	// After the deadline every request fails at once, however quick the
	// server (before, the cancel ran on another goroutine and a quick
	// request could finish first).
	for i := 0; i < 100; i++ {
		start = time.Now()
		if _, err := get("/fast"); !errors.Is(err, errPastShutdownDeadline) || time.Since(start) > time.Second {
			t.Fatalf("request %d after the deadline: err %v after %v", i, err, time.Since(start))
		}
	}
}

func TestRequestDeadline(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct{ timeout, want time.Duration }{
		{10 * time.Second, 9 * time.Second},
		{4 * time.Second, 3200 * time.Millisecond},
		{time.Second, 800 * time.Millisecond},
	} {
		if got := requestDeadline(start, tc.timeout).Sub(start); got != tc.want {
			t.Errorf("requestDeadline(%v) = start + %v, want + %v", tc.timeout, got, tc.want)
		}
	}
}
