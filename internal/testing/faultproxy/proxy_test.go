package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer answers every line with the same line and closes its side when
// the client half-closes.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func newProxy(t *testing.T, upstream string) *Proxy {
	t.Helper()
	p, err := New(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

type client struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, conn: c, r: bufio.NewReader(c)}
}

func (c *client) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.conn, line+"\n"); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// recv reads one line, waiting at most d.
func (c *client) recv(d time.Duration) (string, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(d))
	line, err := c.r.ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

func (c *client) roundTrip(line string) {
	c.t.Helper()
	c.send(line)
	got, err := c.recv(2 * time.Second)
	if err != nil || got != line {
		c.t.Fatalf("echo of %q = %q, %v", line, got, err)
	}
}

// silent asserts that nothing arrives for d.
func (c *client) silent(d time.Duration) {
	c.t.Helper()
	got, err := c.recv(d)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		c.t.Fatalf("got %q, %v; want nothing for %v", got, err, d)
	}
}

func TestPassesBytesBothWays(t *testing.T) {
	p := newProxy(t, echoServer(t))
	c := dial(t, p.Addr())
	for _, line := range []string{"a", strings.Repeat("x", 100<<10), "b"} {
		c.roundTrip(line)
	}
	if s := p.Stats(); s.Accepted != 1 || s.Forwarded != 1 || s.Active != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestHalfCloseIsPassedOn(t *testing.T) {
	p := newProxy(t, echoServer(t))
	c := dial(t, p.Addr())
	c.send("last")
	if err := c.conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := c.recv(2 * time.Second)
	if err != nil || got != "last" {
		t.Fatalf("echo after half-close = %q, %v", got, err)
	}
	if _, err := c.recv(2 * time.Second); err != io.EOF {
		t.Fatalf("after the echo: %v, want EOF", err)
	}
}

func TestLatencyDelaysEachDirectionAndKeepsOrder(t *testing.T) {
	p := newProxy(t, echoServer(t))
	c := dial(t, p.Addr())
	c.roundTrip("warm")
	p.SetLatency(100 * time.Millisecond)
	start := time.Now()
	for i := 0; i < 20; i++ {
		c.send(strings.Repeat(string(rune('a'+i)), 10))
	}
	for i := 0; i < 20; i++ {
		want := strings.Repeat(string(rune('a'+i)), 10)
		if got, err := c.recv(2 * time.Second); err != nil || got != want {
			t.Fatalf("line %d = %q, %v; want %q", i, got, err, want)
		}
	}
	// Sent back to back: the whole batch takes about one round trip of
	// added latency, not twenty.
	if d := time.Since(start); d < 200*time.Millisecond || d > 1500*time.Millisecond {
		t.Fatalf("20 lines took %v, want about 200ms", d)
	}
	p.SetLatency(0)
	start = time.Now()
	c.roundTrip("fast")
	if d := time.Since(start); d > 150*time.Millisecond {
		t.Fatalf("round trip after clearing latency took %v", d)
	}
}

func TestBlackHoleHoldsBytesUntilHealed(t *testing.T) {
	p := newProxy(t, echoServer(t))
	c := dial(t, p.Addr())
	c.roundTrip("before")
	p.Update(func(f *Faults) { f.BlackHole = true })
	c.send("during")
	c.silent(200 * time.Millisecond)
	p.Heal()
	if got, err := c.recv(2 * time.Second); err != nil || got != "during" {
		t.Fatalf("after heal = %q, %v; want the held line", got, err)
	}
	c.roundTrip("after")
}

func TestDropNewHoldsOnlyNewConnections(t *testing.T) {
	p := newProxy(t, echoServer(t))
	old := dial(t, p.Addr())
	old.roundTrip("old")
	p.Update(func(f *Faults) { f.DropNew = true })
	fresh := dial(t, p.Addr()) // the TCP handshake with the proxy succeeds
	fresh.send("hello")
	fresh.silent(200 * time.Millisecond)
	old.roundTrip("old still flows")
	if s := p.Stats(); s.Held != 1 || s.Forwarded != 1 {
		t.Fatalf("stats while dropping = %+v", s)
	}
	p.Heal()
	if got, err := fresh.recv(2 * time.Second); err != nil || got != "hello" {
		t.Fatalf("held connection after heal = %q, %v", got, err)
	}
}

func TestPartitionStopsOldAndNewConnections(t *testing.T) {
	p := newProxy(t, echoServer(t))
	old := dial(t, p.Addr())
	old.roundTrip("x")
	p.Partition()
	if f := p.Faults(); !f.BlackHole || !f.DropNew {
		t.Fatalf("faults = %+v", f)
	}
	old.send("old")
	fresh := dial(t, p.Addr())
	fresh.send("new")
	old.silent(150 * time.Millisecond)
	fresh.silent(50 * time.Millisecond)
	p.Heal()
	for _, c := range []*client{old, fresh} {
		if _, err := c.recv(2 * time.Second); err != nil {
			t.Fatalf("after heal: %v", err)
		}
	}
}

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE)
}

func TestRefuseResetsNewConnections(t *testing.T) {
	p := newProxy(t, echoServer(t))
	old := dial(t, p.Addr())
	old.roundTrip("x")
	p.Update(func(f *Faults) { f.Refuse = true })
	// The reset may come before the dial returns (a busy machine) or at
	// the first read.
	conn, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second)
	if err == nil {
		t.Cleanup(func() { conn.Close() })
		fresh := &client{t: t, conn: conn, r: bufio.NewReader(conn)}
		_, err = fresh.recv(2 * time.Second)
	}
	if !isReset(err) {
		t.Fatalf("refused connection: %v, want a reset", err)
	}
	old.roundTrip("existing connections are not refused")
	if s := p.Stats(); s.Refused != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestResetKillsOpenConnections(t *testing.T) {
	p := newProxy(t, echoServer(t))
	a, b := dial(t, p.Addr()), dial(t, p.Addr())
	a.roundTrip("a")
	b.roundTrip("b")
	if n := p.Reset(); n != 2 {
		t.Fatalf("Reset = %d, want 2", n)
	}
	for _, c := range []*client{a, b} {
		if _, err := c.recv(2 * time.Second); !isReset(err) {
			t.Fatalf("read after reset: %v", err)
		}
	}
	dial(t, p.Addr()).roundTrip("new connections work")
	deadline := time.Now().Add(2 * time.Second)
	for p.Stats().Active != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("stats = %+v, want one active connection", p.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTLSPassesThrough(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	p := newProxy(t, srv.Listener.Addr().String())
	// The test server's certificate is valid for 127.0.0.1, which is also
	// the proxy's address.
	tr := srv.Client().Transport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	get := func() (string, error) {
		resp, err := hc.Get("https://" + p.Addr() + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := get(); err != nil || body != "ok" {
		t.Fatalf("GET through the proxy = %q, %v", body, err)
	}
	// A reset breaks the kept-alive connection; the next request dials again.
	p.Reset()
	if body, err := get(); err != nil || body != "ok" {
		t.Fatalf("GET after a reset = %q, %v", body, err)
	}
}

func TestCloseEndsEverything(t *testing.T) {
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	c.roundTrip("x")
	p.Update(func(f *Faults) { f.DropNew = true })
	held := dial(t, p.Addr())
	held.send("held")
	time.Sleep(20 * time.Millisecond)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.recv(2 * time.Second); !isReset(err) {
		t.Fatalf("open connection after Close: %v", err)
	}
	if _, err := held.recv(2 * time.Second); !isReset(err) {
		t.Fatalf("held connection after Close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("still accepting after Close")
	}
	p.Heal() // no effect, no panic
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestNewRejectsBadUpstream(t *testing.T) {
	if _, err := New("no-port"); err == nil {
		t.Fatal("accepted an upstream without a port")
	}
}
