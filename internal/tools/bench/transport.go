package bench

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Verbs counted by Counter. A GET of a named object is "get", of a
// collection "list", and any request with watch=true (including a streamed
// list) "watch".
const (
	VerbGet    = "get"
	VerbList   = "list"
	VerbWatch  = "watch"
	VerbCreate = "create"
	VerbUpdate = "update"
	VerbPatch  = "patch"
	VerbDelete = "delete"
	VerbOther  = "other"
)

// Verbs is the order in which reports list request counts.
var Verbs = []string{VerbGet, VerbList, VerbWatch, VerbCreate, VerbUpdate, VerbPatch, VerbDelete, VerbOther}

// Counts are requests by verb.
type Counts map[string]int

// Total is the sum over all verbs.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// Sub returns c - earlier, verb by verb.
func (c Counts) Sub(earlier Counts) Counts {
	out := Counts{}
	for v, n := range c {
		if d := n - earlier[v]; d != 0 {
			out[v] = d
		}
	}
	return out
}

// Add adds other to c.
func (c Counts) Add(other Counts) {
	for v, n := range other {
		c[v] += n
	}
}

// Counter counts the HTTP requests a client sends, by verb, as they leave
// the process: what reaches the API server, not what the code under test
// says it does. It is safe for concurrent use.
type Counter struct {
	mu        sync.Mutex
	counts    Counts
	lastWrite time.Time // end of the latest successful create or update
	// unknownWrite is when the latest create or update whose outcome is
	// unknown was sent: its context ended before an answer came, and the
	// API server may have applied it.
	unknownWrite time.Time
	// updates are the ends of the latest successful updates, oldest first,
	// at most maxRecentUpdates of them.
	updates []time.Time
	// serverErrors counts responses with a 5xx status and requests that
	// got no response at all (time-outs, refused connections).
	serverErrors int
	// trace, if set, is called with every request as it leaves.
	trace func(verb string, req *http.Request)
}

// maxRecentUpdates bounds the update times a Counter keeps: enough for the
// few writes of a trial, and no growth over a long run.
const maxRecentUpdates = 64

// NewCounter returns an empty counter.
func NewCounter() *Counter { return &Counter{counts: Counts{}} }

// Config returns a copy of cfg whose requests are counted by c. Client-side
// rate limiting is turned off (QPS < 0) so that it does not distort
// latencies or settle times.
func (c *Counter) Config(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.QPS = -1
	out.RateLimiter = nil
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingRoundTripper{c: c, next: rt} })
	return out
}

// SetTrace makes c call f with every request from now on, as it leaves
// (for diagnosis). f must be safe for concurrent use.
func (c *Counter) SetTrace(f func(verb string, req *http.Request)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trace = f
}

// Snapshot returns the counts so far.
func (c *Counter) Snapshot() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(Counts, len(c.counts))
	for v, n := range c.counts {
		out[v] = n
	}
	return out
}

// ServerErrors counts the responses with a 5xx status and the requests that
// failed without a response, since the counter was made.
func (c *Counter) ServerErrors() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.serverErrors
}

// LastWrite is when the latest successful create or update returned; zero
// if none did.
func (c *Counter) LastWrite() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastWrite
}

// WriteUnknownSince reports whether a create or update was sent after the
// latest successful one (or after none) and ended with its context, with
// no answer: the API server may have applied it, so LastWrite may not be
// the latest write of the object.
func (c *Counter) WriteUnknownSince() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unknownWrite.After(c.lastWrite)
}

// FirstUpdateAfter is when the first successful update that returned after
// t returned, among the latest maxRecentUpdates; ok is false if there is
// none.
func (c *Counter) FirstUpdateAfter(t time.Time) (at time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range c.updates {
		if u.After(t) {
			return u, true
		}
	}
	return time.Time{}, false
}

type countingRoundTripper struct {
	c    *Counter
	next http.RoundTripper
}

func (rt *countingRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	verb := classify(req)
	rt.c.mu.Lock()
	rt.c.counts[verb]++
	trace := rt.c.trace
	rt.c.mu.Unlock()
	if trace != nil {
		trace(verb, req)
	}
	sent := time.Now()
	resp, err := rt.next.RoundTrip(req)
	if (err != nil && req.Context().Err() == nil) || (err == nil && resp.StatusCode >= 500) {
		rt.c.mu.Lock()
		rt.c.serverErrors++
		rt.c.mu.Unlock()
	}
	if err != nil && req.Context().Err() != nil && (verb == VerbCreate || verb == VerbUpdate) {
		rt.c.mu.Lock()
		rt.c.unknownWrite = sent
		rt.c.mu.Unlock()
	}
	if err == nil && resp.StatusCode < 300 && (verb == VerbCreate || verb == VerbUpdate) {
		now := time.Now()
		rt.c.mu.Lock()
		rt.c.lastWrite = now
		if verb == VerbUpdate {
			if len(rt.c.updates) == maxRecentUpdates {
				rt.c.updates = append(rt.c.updates[:0], rt.c.updates[1:]...)
			}
			rt.c.updates = append(rt.c.updates, now)
		}
		rt.c.mu.Unlock()
	}
	return resp, err
}

// classify names the Kubernetes verb of a request.
func classify(req *http.Request) string {
	switch req.Method {
	case http.MethodGet:
		if w := req.URL.Query().Get("watch"); w == "true" || w == "1" {
			return VerbWatch
		}
		if isCollection(req.URL.Path) {
			return VerbList
		}
		return VerbGet
	case http.MethodPost:
		return VerbCreate
	case http.MethodPut:
		return VerbUpdate
	case http.MethodPatch:
		return VerbPatch
	case http.MethodDelete:
		return VerbDelete
	}
	return VerbOther
}

// isCollection reports whether path names a collection of resources rather
// than one object: /api/v1[/namespaces/<ns>]/<resource> or
// /apis/<group>/<version>[/namespaces/<ns>]/<resource>.
func isCollection(path string) bool {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		segs = segs[2:]
	case len(segs) >= 3 && segs[0] == "apis":
		segs = segs[3:]
	default:
		return false
	}
	// A namespace itself (/api/v1/namespaces/<ns>) is an object.
	if len(segs) >= 3 && segs[0] == "namespaces" {
		segs = segs[2:]
	}
	return len(segs) == 1
}
