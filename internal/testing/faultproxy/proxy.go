// Package faultproxy is a TCP proxy on loopback whose faults a test turns on
// and off while connections run through it: added latency, new connections
// held or refused, every connection stalled (a partition), or reset.
//
// It forwards bytes without looking at them, so it sits transparently in
// front of a TLS server whose certificate names the loopback address (such
// as the kube-apiserver of internal/testing/testcluster): point a client at Addr
// instead of the server.
//
// The faults model the network, not the server:
//
//   - Latency delays every chunk of bytes, in each direction, by that much
//     after the proxy read it. Order is kept.
//   - DropNew accepts new connections but forwards nothing and does not even
//     connect upstream until it is cleared; then they proceed, as a
//     connection attempt does when a lost SYN is retransmitted.
//   - BlackHole stops every byte on every connection, as a partition shorter
//     than TCP's retransmission timeout does: nothing arrives while it lasts,
//     nothing is lost, and what was sent arrives after it is cleared. Whoever
//     gave up waiting meanwhile sees the late bytes (for example a request
//     the client cancelled).
//   - Refuse resets new connections at once, as a closed port does.
//   - Reset resets every open connection now, on both sides.
//
// Partition (BlackHole and DropNew) and Heal (no faults) are shorthands.
// A Proxy is safe for concurrent use.
package faultproxy

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Faults is the set of faults in effect. The zero value passes everything.
type Faults struct {
	// Latency is added to every chunk of bytes, in each direction.
	Latency time.Duration
	// DropNew holds new connections without forwarding anything.
	DropNew bool
	// BlackHole holds every byte of every connection.
	BlackHole bool
	// Refuse resets new connections as soon as they are accepted.
	Refuse bool
}

// Stats counts what the proxy did.
type Stats struct {
	Accepted  int64 // connections accepted
	Forwarded int64 // connections connected upstream
	Refused   int64 // connections reset on arrival (Refuse)
	Reset     int64 // connections reset by Reset or Close
	Active    int   // connections open now, upstream connected
	Held      int   // connections waiting for DropNew to clear
}

// dialTimeout bounds a connection attempt to the upstream server.
const dialTimeout = 5 * time.Second

// maxChunk is the largest read forwarded as one chunk.
const maxChunk = 32 << 10

// queuedChunks bounds the bytes a direction holds (under BlackHole or
// Latency) before the proxy stops reading and TCP pushes back on the sender.
const queuedChunks = 64

// Proxy forwards connections from its loopback address to one upstream
// address. Create it with New and stop it with Close.
type Proxy struct {
	upstream string
	ln       net.Listener

	mu      sync.Mutex
	faults  Faults
	closed  bool
	links   map[*link]struct{}
	held    map[net.Conn]struct{}
	changed chan struct{} // closed and replaced whenever faults change

	wg sync.WaitGroup

	accepted, forwarded, refused, reset atomic.Int64
}

// New listens on a free port of 127.0.0.1 and forwards to upstream
// ("host:port"), passing everything until faults are set.
func New(upstream string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(upstream); err != nil {
		return nil, fmt.Errorf("faultproxy: upstream %q: %w", upstream, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{
		upstream: upstream,
		ln:       ln,
		links:    map[*link]struct{}{},
		held:     map[net.Conn]struct{}{},
		changed:  make(chan struct{}),
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to, "127.0.0.1:<port>".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Upstream is the address the proxy forwards to.
func (p *Proxy) Upstream() string { return p.upstream }

// Faults returns the faults in effect.
func (p *Proxy) Faults() Faults {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults
}

// Set replaces the faults in effect. Connections held by DropNew are
// forwarded once it is cleared; bytes held by BlackHole flow once it is.
func (p *Proxy) Set(f Faults) {
	if f.Latency < 0 {
		f.Latency = 0
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.faults = f
	close(p.changed)
	p.changed = make(chan struct{})
	var release []net.Conn
	if !f.DropNew {
		for c := range p.held {
			release = append(release, c)
			delete(p.held, c)
		}
	}
	p.mu.Unlock()
	for _, c := range release {
		p.forward(c)
	}
}

// Update changes the faults in effect with change, atomically.
func (p *Proxy) Update(change func(*Faults)) {
	p.mu.Lock()
	f := p.faults
	p.mu.Unlock()
	change(&f)
	p.Set(f)
}

// SetLatency sets the latency added in each direction.
func (p *Proxy) SetLatency(d time.Duration) { p.Update(func(f *Faults) { f.Latency = d }) }

// Partition holds every byte and every new connection until Heal.
func (p *Proxy) Partition() {
	p.Update(func(f *Faults) { f.BlackHole, f.DropNew = true, true })
}

// Heal clears every fault.
func (p *Proxy) Heal() { p.Set(Faults{}) }

// Reset resets every connection open now (both sides see a TCP RST),
// including those DropNew holds, and returns how many there were. New
// connections are not affected.
func (p *Proxy) Reset() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	held := make([]net.Conn, 0, len(p.held))
	for c := range p.held {
		held = append(held, c)
		delete(p.held, c)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.abort()
	}
	for _, c := range held {
		resetConn(c)
	}
	n := len(links) + len(held)
	p.reset.Add(int64(n))
	return n
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{
		Accepted:  p.accepted.Load(),
		Forwarded: p.forwarded.Load(),
		Refused:   p.refused.Load(),
		Reset:     p.reset.Load(),
		Active:    len(p.links),
		Held:      len(p.held),
	}
}

// Close stops listening, resets every connection and waits for the proxy's
// goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.changed)
	p.mu.Unlock()
	err := p.ln.Close()
	p.Reset()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient accept error (too many files): back off briefly.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.accepted.Add(1)
		p.mu.Lock()
		closed, f := p.closed, p.faults
		if !closed && !f.Refuse && f.DropNew {
			p.held[c] = struct{}{}
		}
		p.mu.Unlock()
		switch {
		case closed:
			resetConn(c)
		case f.Refuse:
			p.refused.Add(1)
			resetConn(c)
		case f.DropNew:
			// Held until Set clears DropNew, Reset or Close.
		default:
			p.forward(c)
		}
	}
}

// forward connects c upstream and starts moving bytes.
func (p *Proxy) forward(c net.Conn) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		resetConn(c)
		return
	}
	// Added under the lock that Close takes before it waits.
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		up, err := net.DialTimeout("tcp", p.upstream, dialTimeout)
		if err != nil {
			resetConn(c)
			return
		}
		p.forwarded.Add(1)
		l := &link{p: p, client: c, server: up, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			resetConn(c)
			resetConn(up)
			return
		}
		p.links[l] = struct{}{}
		p.mu.Unlock()
		l.run()
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()
}

// wait returns the faults in effect and a channel closed when they change.
func (p *Proxy) wait() (Faults, <-chan struct{}, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults, p.changed, p.closed
}

// link is one proxied connection: a client and its upstream connection.
type link struct {
	p              *Proxy
	client, server net.Conn
	done           chan struct{} // closed by abort
	once           sync.Once
}

// chunk is bytes read from one side, with when they were read.
type chunk struct {
	data []byte
	at   time.Time
}

// run moves bytes both ways until both directions have ended.
func (l *link) run() {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.pipe(l.client, l.server) }()
	go func() { defer wg.Done(); l.pipe(l.server, l.client) }()
	wg.Wait()
	l.client.Close()
	l.server.Close()
}

// abort resets both connections and stops the pipes.
func (l *link) abort() {
	l.once.Do(func() {
		close(l.done)
		resetConn(l.client)
		resetConn(l.server)
	})
}

// pipe copies src to dst through the faults. A read error or EOF on src is
// passed on as a half-close of dst once everything read has been written; a
// write error aborts the link.
func (l *link) pipe(src, dst net.Conn) {
	queue := make(chan chunk, queuedChunks)
	go func() {
		defer close(queue)
		buf := make([]byte, maxChunk)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				data := append([]byte(nil), buf[:n]...)
				select {
				case queue <- chunk{data: data, at: time.Now()}:
				case <-l.done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range queue {
		if !l.deliverable(c) {
			l.abort()
			break
		}
		if _, err := dst.Write(c.data); err != nil {
			l.abort()
			break
		}
	}
	// Let the reader goroutine finish (abort unblocks it) and pass on EOF.
	for range queue {
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		_ = dst.Close()
	}
}

// deliverable waits until c may be written: no black hole, and its latency
// has passed. It returns false when the link is aborted or the proxy closed.
func (l *link) deliverable(c chunk) bool {
	for {
		f, changed, closed := l.p.wait()
		if closed {
			return false
		}
		var (
			timer *time.Timer
			due   <-chan time.Time // nil, never ready, in a black hole
		)
		if !f.BlackHole {
			wait := time.Until(c.at.Add(f.Latency))
			if wait <= 0 {
				return true
			}
			timer = time.NewTimer(wait)
			due = timer.C
		}
		select {
		case <-due:
			return true
		case <-changed:
			if timer != nil {
				timer.Stop()
			}
		case <-l.done:
			if timer != nil {
				timer.Stop()
			}
			return false
		}
	}
}

// resetConn closes c so that the peer sees a TCP RST rather than a FIN.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
