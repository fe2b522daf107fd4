package bench

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Timeline collects timestamped steps of one trial from several parties:
// the requests each candidate's transport sends and the answers it gets,
// the bytes its watch receives, its elector's log and its run function's
// start and stop. It shows where the time of a handover goes. It is safe
// for concurrent use.
type Timeline struct {
	mu    sync.Mutex
	steps []Step
}

// Step is one entry of a Timeline.
type Step struct {
	At   time.Time
	Who  string
	What string
}

// Add records what happened to who now.
func (tl *Timeline) Add(who, what string) { tl.AddAt(time.Now(), who, what) }

// AddAt records what happened to who at at.
func (tl *Timeline) AddAt(at time.Time, who, what string) {
	tl.mu.Lock()
	tl.steps = append(tl.steps, Step{At: at, Who: who, What: what})
	tl.mu.Unlock()
}

// Steps returns the steps in time order.
func (tl *Timeline) Steps() []Step {
	tl.mu.Lock()
	s := slices.Clone(tl.steps)
	tl.mu.Unlock()
	slices.SortStableFunc(s, func(a, b Step) int { return a.At.Compare(b.At) })
	return s
}

// Write prints the steps at or after from, with their time since from and
// since the step before, one a line.
func (tl *Timeline) Write(w io.Writer, from time.Time) {
	prev := from
	for _, s := range tl.Steps() {
		if s.At.Before(from) {
			continue
		}
		fmt.Fprintf(w, "  %8.3f ms (+%7.3f)  %-12s %s\n", ms(s.At.Sub(from)), ms(s.At.Sub(prev)), s.Who, s.What)
		prev = s.At
	}
}

// transport records who's requests, answers and watch bytes.
func (tl *Timeline) transport(who string, next http.RoundTripper) http.RoundTripper {
	return &timelineRoundTripper{tl: tl, who: who, next: next}
}

type timelineRoundTripper struct {
	tl   *Timeline
	who  string
	next http.RoundTripper
}

func (rt *timelineRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	verb := classify(req)
	what := verb + " " + shortPath(req.URL.Path)
	rt.tl.Add(rt.who, what+" sent")
	resp, err := rt.next.RoundTrip(req)
	switch {
	case err != nil:
		rt.tl.Add(rt.who, fmt.Sprintf("%s failed: %v", what, err))
	case verb == VerbWatch:
		rt.tl.Add(rt.who, fmt.Sprintf("%s open (%d)", what, resp.StatusCode))
		resp.Body = &timelineBody{ReadCloser: resp.Body, tl: rt.tl, who: rt.who}
	default:
		rt.tl.Add(rt.who, fmt.Sprintf("%s answered (%d)", what, resp.StatusCode))
	}
	return resp, err
}

// shortPath keeps the resource and name of an API path.
func shortPath(p string) string {
	segs := strings.Split(strings.Trim(p, "/"), "/")
	if len(segs) > 2 {
		segs = segs[len(segs)-2:]
	}
	return strings.Join(segs, "/")
}

// timelineBody records every read of a watch stream that returns bytes:
// when an event reached the process.
type timelineBody struct {
	io.ReadCloser
	tl  *Timeline
	who string
}

func (b *timelineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.tl.Add(b.who, fmt.Sprintf("watch received %d bytes", n))
	}
	if err != nil {
		b.tl.Add(b.who, fmt.Sprintf("watch ended: %v", err))
	}
	return n, err
}

// logger returns a zap logger at debug level whose entries become steps of
// who.
func (tl *Timeline) logger(who string) *zap.Logger {
	enc := zapcore.NewConsoleEncoder(zapcore.EncoderConfig{MessageKey: "msg", LevelKey: "level", EncodeLevel: zapcore.LowercaseLevelEncoder})
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(timelineWriter{tl: tl, who: who}), zapcore.DebugLevel))
}

type timelineWriter struct {
	tl  *Timeline
	who string
}

func (w timelineWriter) Write(p []byte) (int, error) {
	w.tl.Add(w.who, "log: "+strings.TrimSpace(string(p)))
	return len(p), nil
}
