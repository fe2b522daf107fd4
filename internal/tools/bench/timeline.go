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
	rt.tl.Add(rt.who, what+stepSent)
	resp, err := rt.next.RoundTrip(req)
	switch {
	case err != nil:
		rt.tl.Add(rt.who, fmt.Sprintf("%s failed: %v", what, err))
	case verb == VerbWatch:
		rt.tl.Add(rt.who, fmt.Sprintf("%s open (%d)", what, resp.StatusCode))
		resp.Body = &timelineBody{ReadCloser: resp.Body, tl: rt.tl, who: rt.who}
	default:
		rt.tl.Add(rt.who, fmt.Sprintf("%s"+stepAnswered+"(%d)", what, resp.StatusCode))
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
		b.tl.Add(b.who, fmt.Sprintf(stepWatchReceived+"%d bytes", n))
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

// The words of the steps that HandoverLegs reads: of a request (after its
// verb and path), of a watch stream, and of the run functions of a traced
// trial.
const (
	stepSent          = " sent"
	stepAnswered      = " answered "
	stepWatchReceived = "watch received "
	stepRunStarted    = "run function started"
	stepRunReturned   = "run function returned"
)

// Legs splits one released handover (the successor wrote the lock) into
// the parts the candidates' own code spends and the parts that are the API
// server's: what a change of meshd can move, and what only the machine's
// load moves.
type Legs struct {
	// Release is from the cancel to the old holder's release UPDATE sent
	// (its run function's return and the write's preparation): meshd's.
	Release time.Duration
	// Seen is from that UPDATE sent to the successor's watch receiving
	// the result: the API server's write and its watch delivery.
	Seen time.Duration
	// React is from that watch delivery to the successor's UPDATE sent
	// (decoding, deciding, preparing the write): meshd's.
	React time.Duration
	// Acquire is from that UPDATE sent to the successor's first UPDATE
	// answered 200: one round trip, the API server's (more than one
	// when that write conflicted and was made again).
	Acquire time.Duration
	// Start is from that UPDATE's answer to the run function's start:
	// meshd's.
	Start time.Duration
}

// Own is the candidates' share: Release + React + Start.
func (l Legs) Own() time.Duration { return l.Release + l.React + l.Start }

// HandoverLegs splits the handover that began at from, when old was
// cancelled, and ended when next's run function started. ok is false when
// a step is missing: next did not write (its predecessor named it) or
// the trial was not traced.
func (tl *Timeline) HandoverLegs(from time.Time, old, next string) (l Legs, ok bool) {
	steps := tl.Steps()
	find := func(after time.Time, who string, match func(string) bool) (time.Time, bool) {
		for _, s := range steps {
			if s.Who == who && !s.At.Before(after) && match(s.What) {
				return s.At, true
			}
		}
		return time.Time{}, false
	}
	is := func(what string) func(string) bool { return func(s string) bool { return s == what } }
	updateSent := func(s string) bool { return strings.HasPrefix(s, VerbUpdate+" ") && strings.HasSuffix(s, stepSent) }
	updateOK := func(s string) bool {
		return strings.HasPrefix(s, VerbUpdate+" ") && strings.HasSuffix(s, stepAnswered+"(200)")
	}
	watched := func(s string) bool { return strings.HasPrefix(s, stepWatchReceived) }

	released, ok1 := find(from, old, updateSent)
	seen, ok2 := find(released, next, watched)
	wrote, ok3 := find(seen, next, updateSent)
	answered, ok4 := find(wrote, next, updateOK)
	started, ok5 := find(answered, next, is(stepRunStarted))
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return Legs{}, false
	}
	return Legs{
		Release: released.Sub(from),
		Seen:    seen.Sub(released),
		React:   wrote.Sub(seen),
		Acquire: answered.Sub(wrote),
		Start:   started.Sub(answered),
	}, true
}

// writeLegs prints the medians of each leg of legs, one line after label;
// nothing without legs.
func writeLegs(w io.Writer, label string, legs []Legs) {
	if len(legs) == 0 {
		return
	}
	med := func(f func(Legs) time.Duration) string {
		d := make(Durations, len(legs))
		for i, l := range legs {
			d[i] = f(l)
		}
		m, _ := d.Median()
		return fmt.Sprintf("%.3f ms", ms(m))
	}
	fmt.Fprintf(w, "%s, legs of %d released handovers (medians): cancel -> release sent %s (meshd), -> successor's watch %s (API server), -> its update sent %s (meshd), -> answered %s (API server), -> run function started %s (meshd); meshd's own share %s\n",
		label, len(legs), med(func(l Legs) time.Duration { return l.Release }), med(func(l Legs) time.Duration { return l.Seen }),
		med(func(l Legs) time.Duration { return l.React }), med(func(l Legs) time.Duration { return l.Acquire }),
		med(func(l Legs) time.Duration { return l.Start }), med(Legs.Own))
}
