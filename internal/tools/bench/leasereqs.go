package bench

import (
	"net/http"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// LeaseRequests counts the requests a client sends to each named Lease, by
// verb, as they leave the process. A replica uses it to tell its leaders'
// requests from its followers' requests; requests that name no Lease (lists,
// watches, other resources) are not counted here. It is safe for concurrent
// use.
type LeaseRequests struct {
	mu     sync.Mutex
	byName map[string]Counts
}

// NewLeaseRequests returns an empty count.
func NewLeaseRequests() *LeaseRequests { return &LeaseRequests{byName: map[string]Counts{}} }

// Config returns a copy of cfg whose requests to named Leases are counted
// by l.
func (l *LeaseRequests) Config(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &leaseRoundTripper{l: l, next: rt} })
	return out
}

// Snapshot returns the counts so far, by Lease name.
func (l *LeaseRequests) Snapshot() map[string]Counts {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]Counts, len(l.byName))
	for name, c := range l.byName {
		cp := make(Counts, len(c))
		cp.Add(c)
		out[name] = cp
	}
	return out
}

type leaseRoundTripper struct {
	l    *LeaseRequests
	next http.RoundTripper
}

func (rt *leaseRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if name, ok := leaseName(req.URL.Path); ok {
		verb := classify(req)
		rt.l.mu.Lock()
		c := rt.l.byName[name]
		if c == nil {
			c = Counts{}
			rt.l.byName[name] = c
		}
		c[verb]++
		rt.l.mu.Unlock()
	}
	return rt.next.RoundTrip(req)
}

// leaseName returns the name of the Lease a path names:
// /apis/coordination.k8s.io/v1/namespaces/<ns>/leases/<name>.
func leaseName(path string) (string, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if len(segs) != 7 || segs[0] != "apis" || segs[1] != "coordination.k8s.io" || segs[3] != "namespaces" || segs[5] != "leases" || segs[6] == "" {
		return "", false
	}
	return segs[6], true
}

// splitByLeader sums the requests of a window (stop - start, by Lease name)
// to the Leases of the elections a replica led (leading[name] true) and to
// those of the elections it followed. Leases of no election of the replica
// count in neither.
func splitByLeader(start, stop map[string]Counts, leading map[string]bool) (leader, follower Counts) {
	leader, follower = Counts{}, Counts{}
	for name, c := range stop {
		isLeader, ok := leading[name]
		if !ok {
			continue
		}
		d := c.Sub(start[name])
		if isLeader {
			leader.Add(d)
		} else {
			follower.Add(d)
		}
	}
	return leader, follower
}
