package revisions

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The watch of the webhook asks for no timeout, so that the API server's
// default (30 to 60 minutes) sets how long it lasts.
func TestWatchLeavesItsDurationToTheAPIServer(t *testing.T) {
	defer goleak.VerifyNone(t)
	watches := make(chan url.Values, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("watch") != "true" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind":"MutatingWebhookConfigurationList","apiVersion":"admissionregistration.k8s.io/v1","metadata":{"resourceVersion":"5"},"items":[]}`))
			return
		}
		select {
		case watches <- q:
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewDefaultWatcher(client, Options{})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); w.Run(stop) }()
	defer func() { close(stop); <-done }()
	select {
	case q := <-watches:
		if q.Has("timeoutSeconds") || q.Has("timeout") {
			t.Fatalf("the watch asked for a timeout: %v", q)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch request")
	}
}
