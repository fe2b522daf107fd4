package revisions

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Run returns soon after stop closes, whatever the API server does: not
// listening at all, or accepting requests and never answering.
func TestRunStopsWithoutAPIServer(t *testing.T) {
	hang := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer hanging.Close()
	defer close(hang)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()

	for name, host := range map[string]string{"refused": refused, "hanging": hanging.URL} {
		t.Run(name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
				goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
				goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
			client, err := kubernetes.NewForConfig(&rest.Config{Host: host})
			if err != nil {
				t.Fatal(err)
			}
			w, err := NewDefaultWatcher(client, Options{})
			if err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				w.Run(stop)
			}()
			time.Sleep(300 * time.Millisecond) // a list in flight or backing off
			close(stop)
			start := time.Now()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Run did not return within 5s of stop")
			}
			t.Logf("Run returned %v after stop", time.Since(start))
			if took := time.Since(start); took > 500*time.Millisecond {
				t.Errorf("Run took %v to return after stop", took)
			}
			if w.HasSynced() {
				t.Error("synced without an API server")
			}
		})
	}
}
