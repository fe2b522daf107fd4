package sim

import (
	"hash/fnv"
	"strconv"
	"sync"
)

// callGate makes the order of API calls a function of the seed. Goroutines
// woken in one step (a run function and its elector, the parts of client-go's
// informer, two candidates) run in the Go scheduler's order; their requests
// would reach the API in that order too. Instead every request of an actor
// waits at the gate, and the world, once every goroutine is blocked, lets
// the waiting requests through one at a time, settling after each, in an
// order drawn from the seed and the requests themselves (who asks for what),
// never from when they arrived.
type callGate struct {
	seed int64

	mu      sync.Mutex
	waiting []*gatedCall
}

type gatedCall struct {
	rank uint64
	key  string
	pass chan struct{}
}

func newCallGate(seed int64) *callGate { return &callGate{seed: seed} }

// wait blocks the calling request until the world lets it through. A nil
// gate (an API used outside a world) lets every request through at once.
// It needs no context: the world serves every waiting request within the
// step it was made in, before any time passes.
func (g *callGate) wait(actor, verb, resource, name string) {
	if g == nil {
		return
	}
	key := actor + "\x00" + verb + "\x00" + resource + "\x00" + name
	h := fnv.New64a()
	_, _ = h.Write([]byte(strconv.FormatInt(g.seed, 10) + "\x00" + key))
	c := &gatedCall{rank: h.Sum64(), key: key, pass: make(chan struct{})}
	g.mu.Lock()
	g.waiting = append(g.waiting, c)
	g.mu.Unlock()
	<-c.pass
}

// releaseOne lets the first waiting request through and reports whether
// there was one. Requests with the same key (one actor asking for the same
// thing on two goroutines) are interchangeable.
func (g *callGate) releaseOne() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	best := -1
	for i, c := range g.waiting {
		if best < 0 || c.rank < g.waiting[best].rank || (c.rank == g.waiting[best].rank && c.key < g.waiting[best].key) {
			best = i
		}
	}
	if best < 0 {
		g.mu.Unlock()
		return false
	}
	c := g.waiting[best]
	g.waiting = append(g.waiting[:best], g.waiting[best+1:]...)
	g.mu.Unlock()
	close(c.pass)
	return true
}
