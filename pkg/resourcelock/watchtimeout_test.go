package resourcelock

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meshd-io/meshd/internal/lockwatch"
)

// The shared watch and a lock's own watch ask for no timeout, so that the
// API server's default (30 to 60 minutes) sets how long they last. Both the
// streamed list and the plain watch after a list are checked.
func TestWatchesLeaveTheirDurationToTheAPIServer(t *testing.T) {
	defer goleak.VerifyNone(t)
	watches := make(chan url.Values, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("watch") != "true" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind":"LeaseList","apiVersion":"coordination.k8s.io/v1","metadata":{"resourceVersion":"5"},"items":[]}`))
			return
		}
		select {
		case watches <- q:
		default:
		}
		if q.Get("sendInitialEvents") == "true" {
			// Refuse the streamed list: the reflector lists, then watches.
			http.Error(w, "no streamed lists here", http.StatusBadRequest)
			return
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
	lock, err := New(LeasesResourceLock, "ns", "lock", client, Config{Identity: "me"})
	if err != nil {
		t.Fatal(err)
	}
	watchable := lock.(*LeaseLock)
	for name, lw := range map[string]func() func(){
		"shared watch": func() func() { return lockwatch.NewWatchHub().Subscribe(watchable, lockwatch.Subscriber{}) },
		"own watch": func() func() {
			return lockwatch.NewWatchHub().Subscribe(privateOnly{watchable}, lockwatch.Subscriber{})
		},
	} {
		stop := lw()
		plain := false
		for !plain {
			select {
			case q := <-watches:
				if q.Has("timeoutSeconds") || q.Has("timeout") {
					t.Fatalf("%s: a watch asked for a timeout: %v", name, q)
				}
				plain = q.Get("sendInitialEvents") != "true"
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: no plain watch request", name)
			}
		}
		stop()
	}
}

// privateOnly hides a lock's SharedWatch, so that the hub gives it a watch
// of its own.
type privateOnly struct{ lockwatch.Source }
