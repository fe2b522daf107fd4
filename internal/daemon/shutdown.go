package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// ShutdownDeadline bounds the API requests made while the daemon shuts down,
// so that an API server that does not answer cannot hold the shutdown past
// Config.ShutdownTimeout: a lock release, a list or a watch in flight gives
// up at the deadline instead of at its own, longer timeout (a release waits
// up to half the ttl, 15s by default).
//
// Wrap the transports of Config.Client and Config.ElectionClient with
// WrapTransport (rest.Config.Wrap) and pass the same ShutdownDeadline in
// Config.ShutdownDeadline; Run sets the deadline when shutdown begins. Until
// then requests are left alone; from the deadline on, every request, in
// flight or new, is cancelled. Build it with NewShutdownDeadline.
type ShutdownDeadline struct {
	expired context.Context
	expire  context.CancelFunc
	once    sync.Once
}

// NewShutdownDeadline returns a deadline that is not set yet.
func NewShutdownDeadline() *ShutdownDeadline {
	ctx, cancel := context.WithCancel(context.Background())
	return &ShutdownDeadline{expired: ctx, expire: cancel}
}

// set makes every request end by t. Only the first call counts.
func (s *ShutdownDeadline) set(t time.Time) {
	s.once.Do(func() { time.AfterFunc(time.Until(t), s.expire) })
}

// WrapTransport returns rt with the deadline applied to every request.
func (s *ShutdownDeadline) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return &deadlineTransport{expired: s.expired, next: rt}
}

type deadlineTransport struct {
	expired context.Context
	next    http.RoundTripper
}

// errPastShutdownDeadline is the error of a request sent after the
// shutdown deadline.
var errPastShutdownDeadline = errors.New("the daemon's shutdown deadline has passed")

func (t *deadlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.expired.Err() != nil {
		// Fail at once: context.AfterFunc below would cancel the request
		// from another goroutine, and a quick request may finish first.
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Redacted(), errPastShutdownDeadline)
	}
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(t.expired, cancel)
	done := func() {
		stop()
		cancel()
	}
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		done()
		return nil, err
	}
	// The context must live until the body is read: a watch streams it.
	resp.Body = &closeHook{ReadCloser: resp.Body, done: done}
	return resp, nil
}

// closeHook calls done once the body is closed.
type closeHook struct {
	io.ReadCloser
	done func()
}

func (b *closeHook) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}

// requestDeadline is when, after shutdown begins at start, the API requests
// must end: a little before ShutdownTimeout, so that what waited on them
// still returns in time.
func requestDeadline(start time.Time, shutdownTimeout time.Duration) time.Time {
	margin := min(shutdownTimeout/5, time.Second)
	return start.Add(shutdownTimeout - margin)
}
