package reliability

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/meshd-io/meshd/internal/election/defaultwatch"
	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/pkg/election"
)

// ttl of the in-process elections: lease 2s, renew deadline 1s, retry 500ms.
const ttl = 2 * time.Second

// bound is how long after a fault (or its end) a new leader may take: the
// lease, one jittered retry period and a second of slack.
const bound = ttl + 1100*time.Millisecond + time.Second

// candidate is one in-process election whose terms go to a shared ledger.
type candidate struct {
	name   string
	le     *election.LeaderElection
	cancel context.CancelFunc
	done   chan struct{}
	leads  atomic.Bool
}

// startCandidate returns a function that runs the election it is given,
// recording its terms in l under name:
//
//	startCandidate(t, "a", l)(election.NewLeaderElection(...))
func startCandidate(t *testing.T, name string, l *ledger.Ledger) func(*election.LeaderElection, error) *candidate {
	return func(le *election.LeaderElection, err error) *candidate {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return runCandidate(t, name, l, le)
	}
}

func runCandidate(t *testing.T, name string, l *ledger.Ledger, le *election.LeaderElection) *candidate {
	c := &candidate{name: name, le: le, done: make(chan struct{})}
	work := l.Wrap(le.Status().Name, name, func(ctx context.Context) {
		c.leads.Store(true)
		<-ctx.Done()
		c.leads.Store(false)
	})
	le.Add(func(ctx context.Context) error { work(ctx); return nil })
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() { defer close(c.done); le.RunContext(ctx) }()
	t.Cleanup(c.stop)
	return c
}

func (c *candidate) stop() {
	c.cancel()
	<-c.done
}

func (c *candidate) lastError() string { return c.le.Status().LastError }

// electionOptions are the options of every in-process election, as
// defaults (each applies where it fits), then extra; the default revision
// is fixed unless a test passes its own watcher.
func electionOptions(t *testing.T, extra ...election.Option) []election.Option {
	return append([]election.Option{election.Defaults(
		election.WithTTL(ttl),
		election.WithEnabled(true),
		election.WithPrioritized(true),
		election.WithReleaseOnCancel(true),
		election.WithStopTimeout(time.Second),
		election.WithDefaultWatcher(defaultwatch.NewStatic("")),
		election.WithLogger(zaptest.NewLogger(t).Named("election")),
	)}, extra...)
}

// faultyTransport answers requests itself while a fault is set, counting
// every request it sees.
type faultyTransport struct {
	next     http.RoundTripper
	status   atomic.Int32 // 0: pass
	requests atomic.Int32
	faked    atomic.Int32
}

func (f *faultyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	f.requests.Add(1)
	status := int(f.status.Load())
	if status == 0 {
		return f.next.RoundTrip(req)
	}
	f.faked.Add(1)
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the test","code":` +
		strconv.Itoa(status) + `}`
	h := http.Header{"Content-Type": []string{"application/json"}}
	if status == http.StatusTooManyRequests {
		h.Set("Retry-After", "1")
	}
	return &http.Response{
		StatusCode: status, Status: strconv.Itoa(status) + " " + http.StatusText(status), Header: h,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)),
		Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}, nil
}

// faultyClient returns a client of cfg whose requests go through a
// faultyTransport.
func faultyClient(t *testing.T, cfg *rest.Config) (kubernetes.Interface, *faultyTransport) {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	ft := &faultyTransport{}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		ft.next = rt
		return ft
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client, ft
}

// eventRecorder records Events through the real API server until the test
// ends.
func eventRecorder(t *testing.T, client kubernetes.Interface) record.EventRecorder {
	t.Helper()
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	t.Cleanup(b.Shutdown)
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "meshd-reliability"})
}
