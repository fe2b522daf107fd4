package handover

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/electionlog"
	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Metrics is what the protocol counts: the requests it sends and the
// handovers it asks for. The elector's metrics sink implements it.
type Metrics interface {
	// Request counts an API request by verb.
	Request(name, verb string)
	// HandoverRequested counts a request this candidate wrote.
	HandoverRequested(name string)
}

// Config configures the protocol of one candidate. Lock, Grace and the
// timings are required; the timings must be the elector's.
type Config struct {
	// Name labels metrics and logs; the elector's Config.Name.
	Name string
	// Lock carries the handover annotation; its identity and key are this
	// candidate's.
	Lock lockcap.HandoverLock
	// Grace is how long a candidate waits for an answer before it takes
	// the lock by force; it must exceed RetryPeriod.
	Grace time.Duration
	// Accept tells a holder whether to honour a request from a candidate
	// with the given key. Nil refuses every request.
	Accept func(candidateKey string) bool
	// Outranks tells whether this candidate outranks a candidate (or
	// holder) with the given key: the elector's KeyComparison.
	Outranks func(key string) bool
	// YieldDelay, if set, is how long this candidate lets better ones ask
	// first once it is entitled; the elector's YieldOnRelease.
	YieldDelay func() time.Duration
	// LeaseDuration and RetryPeriod are the elector's.
	LeaseDuration, RetryPeriod time.Duration
	// Logger defaults to a no-op logger; Metrics to counting nothing.
	Logger  *zap.Logger
	Metrics Metrics
}

// Protocol is one candidate's side of cooperative preemption, and its
// holder's side while it leads. It is used by one election loop only.
type Protocol struct {
	cfg Config
	log *zap.Logger

	// ask is nil until this candidate first asks a holder, so that a
	// candidate that never does (most followers, every leader) carries
	// only the pointer.
	ask *askState
	// w bounds the age of requests by this candidate's own clock (see
	// stale); nil until this candidate first writes the lock object or
	// meets a request, so that a follower that does neither carries only
	// the pointer.
	w *witness
}

// witness is what stale judges a request's age by: sight is the request
// the annotation carries as this candidate met it, wrote its latest
// successful write of the lock object.
type witness struct {
	sight, wrote sighting
}

// witness returns p.w, made on first use.
func (p *Protocol) witness() *witness {
	if p.w == nil {
		p.w = &witness{}
	}
	return p.w
}

// sighting is a request as this candidate met it: the request in the
// annotation (zero when none), a reading of this candidate's clock before
// which it cannot have been written (zero when unknown) and the uid of the
// object that carried it.
type sighting struct {
	req   requestID
	after time.Time
	uid   string
}

// requestID tells requests apart: the same candidate asking again writes
// a later request time.
type requestID struct {
	candidate, key string
	at             time.Time
}

func requestOf(h lockmeta.Handover) requestID {
	id := requestID{candidate: h.Candidate, key: h.CandidateKey}
	if h.RequestTime != nil {
		id.at = h.RequestTime.Time
	}
	return id
}

// askState is what this candidate knows about its request to one holder's
// term.
type askState struct {
	term       string    // termKey of the holder asked
	askedAt    time.Time // when the request was written; zero: none in this term
	heard      string    // the answer seen, "" while pending
	answeredAt time.Time // when the answer was first seen
	askAgain   bool      // Triggered was called since the refusal
	// unanswered is when this candidate first asked in this term without
	// any answer since: a holder that clears requests as stale (its clock
	// a lease or more apart) is preempted once the grace has passed from
	// then, however often the candidate asked again.
	unanswered time.Time
	entitled   time.Time // when this candidate was first found entitled in this term
	// Another candidate's request this one defers to, and since when.
	other       string
	otherSeenAt time.Time
}

// New returns the protocol for cfg.
func New(cfg Config) *Protocol {
	log := electionlog.For(cfg.Logger, cfg.Name, cfg.Lock)
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	return &Protocol{cfg: cfg, log: log}
}

// me is this candidate's identity.
func (p *Protocol) me() string { return p.cfg.Lock.Identity() }

// Grace is how long a candidate waits for an answer before it takes the
// lock by force.
func (p *Protocol) Grace() time.Duration { return p.cfg.Grace }

// Ask is the candidate's side, called when this candidate is entitled to
// take rec from its holder now. force is true when the holder cannot or
// did not answer, and the candidate takes the lock; false when it asked, or
// an answer is awaited or was given.
func (p *Protocol) Ask(ctx context.Context, rec *resourcelock.Record, now time.Time) (force bool, err error) {
	h := p.cfg.Lock.Handover()
	if h.Holder != rec.HolderIdentity {
		return true, nil // an istiod or client-go holder: it cannot answer
	}
	if t := TermKey(rec); p.ask == nil || p.ask.term != t {
		p.ask = &askState{term: t}
	}
	a := p.ask
	if !a.askedAt.IsZero() && h.Candidate == p.me() && !p.mayAskAgain(h, now) {
		return p.followUp(h, now), nil
	}
	if p.deferToOther(h, now) || p.yielding(now) {
		return false, nil
	}
	if a.heard == "" && !a.unanswered.IsZero() && !now.Before(a.unanswered.Add(p.cfg.Grace)) {
		p.log.Warn("the holder cleared this candidate's requests without an answer for the grace period; taking the lock",
			zap.String("holder", h.Holder), zap.Duration("grace", p.cfg.Grace))
		return true, nil
	}
	if !a.askedAt.IsZero() && now.Before(a.askedAt.Add(p.cfg.RetryPeriod)) {
		return false, nil // at most one request per RetryPeriod
	}
	return false, p.request(ctx, rec, now)
}

// followUp follows this candidate's own request; true: take the lock.
func (p *Protocol) followUp(h lockmeta.Handover, now time.Time) bool {
	a := p.ask
	if h.Answer != "" && a.heard != h.Answer {
		a.heard, a.answeredAt = h.Answer, now
		p.log.Info("the holder answered the handover request", zap.String("holder", h.Holder),
			zap.String("answer", h.Answer), zap.Int64("stopWithinMillis", h.StopWithinMillis))
	}
	if h.Answer != "" || now.Before(a.askedAt.Add(p.cfg.Grace)) {
		// Accepted: the holder stops its work and then names this
		// candidate; it is never preempted while it renews. Refused: the
		// candidate waits to be entitled again.
		return false
	}
	p.log.Warn("the holder did not answer the handover request in time; taking the lock",
		zap.String("holder", h.Holder), zap.Duration("grace", p.cfg.Grace))
	return true
}

// mayAskAgain reports whether a request may be repeated: a refused one
// after Triggered, or once the refusal is older than a lease; an accepted
// one once the holder has let the time it promised, and a RetryPeriod more,
// pass without naming this candidate (it crashed and came back under its
// identity, or its write failed and it went on renewing).
func (p *Protocol) mayAskAgain(h lockmeta.Handover, now time.Time) bool {
	if h.Answer == "" {
		return false
	}
	if p.ask.heard != h.Answer {
		p.followUp(h, now) // note the answer first
	}
	if h.Answer == lockmeta.AnswerAccepted {
		return !now.Before(p.promiseBroken(h))
	}
	return p.ask.askAgain || !now.Before(p.ask.answeredAt.Add(p.cfg.LeaseDuration))
}

// promiseBroken is when an accepted request that has not been honoured
// counts as broken: the promised stop, and a RetryPeriod for the write
// naming this candidate, after the answer was seen.
func (p *Protocol) promiseBroken(h lockmeta.Handover) time.Time {
	return p.ask.answeredAt.Add(time.Duration(h.StopWithinMillis)*time.Millisecond + p.cfg.RetryPeriod)
}

// deferToOther reports whether another candidate's live request should run
// its course first: one this candidate does not outrank, or one the holder
// accepted. A request left unanswered for longer than the grace period is
// not deferred to, nor is an unanswered one that is stale by this
// candidate's clock (the holder clears it). An accepted one is deferred to
// whatever this candidate's clock says of its time: the holder judged it
// fresh by its own clock, and a candidate that replaced it would make the
// holder, its work stopped, release the lock instead of naming anyone.
func (p *Protocol) deferToOther(h lockmeta.Handover, now time.Time) bool {
	if !h.Requested(h.Holder) || h.Candidate == p.me() || h.Answer == lockmeta.AnswerRefused {
		return false
	}
	if h.Answer != lockmeta.AnswerAccepted && p.stale(h, now) {
		return false
	}
	if h.Answer == "" && p.cfg.Outranks != nil && p.cfg.Outranks(h.CandidateKey) {
		return false // this candidate outranks it: replace it, so the lock moves once
	}
	if p.ask.other != h.Candidate {
		p.ask.other, p.ask.otherSeenAt = h.Candidate, now
	}
	return h.Answer == lockmeta.AnswerAccepted || now.Before(p.ask.otherSeenAt.Add(p.cfg.Grace))
}

// request writes this candidate's request.
func (p *Protocol) request(ctx context.Context, rec *resourcelock.Record, now time.Time) error {
	req := lockmeta.Handover{
		Holder:       rec.HolderIdentity,
		Candidate:    p.me(),
		CandidateKey: p.cfg.Lock.Key(),
		RequestTime:  &metav1.Time{Time: now},
		HonoursFence: true,
	}
	if err := p.write(ctx, req, now); err != nil {
		return fmt.Errorf("ask %s to hand over %s: %w", rec.HolderIdentity, p.cfg.Lock.Describe(), err)
	}
	a := p.ask
	if a.unanswered.IsZero() || a.heard != "" {
		a.unanswered = now
	}
	a.askedAt, a.heard, a.answeredAt, a.askAgain = now, "", time.Time{}, false
	p.cfg.Metrics.HandoverRequested(p.cfg.Name)
	p.log.Info("asked the holder to hand over", zap.String("holder", rec.HolderIdentity), zap.String("holderKey", rec.HolderKey))
	return nil
}

// yieldDelay is how long this candidate lets better ones ask first.
func (p *Protocol) yieldDelay() time.Duration {
	if p.cfg.YieldDelay == nil {
		return 0
	}
	return max(p.cfg.YieldDelay(), 0)
}

// yielding reports whether this candidate, entitled now, lets better
// candidates ask first: for its yield delay from when it was first found
// entitled in this term, before its first request. A default flip entitles
// every candidate of the new default at once; without it the first to ask
// would win and a better one take the lock from it again.
func (p *Protocol) yielding(now time.Time) bool {
	if !p.ask.askedAt.IsZero() {
		return false
	}
	if p.ask.entitled.IsZero() {
		p.ask.entitled = now
	}
	return now.Before(p.ask.entitled.Add(p.yieldDelay()))
}

// Triggered is called when the elector was triggered: a refused request
// may be repeated at once.
func (p *Protocol) Triggered() {
	if p.ask != nil {
		p.ask.askAgain = true
	}
}

// AskedAt is when this candidate wrote its request to the current holder's
// term; zero when it has not asked.
func (p *Protocol) AskedAt() time.Time {
	if p.ask == nil {
		return time.Time{}
	}
	return p.ask.askedAt
}

// WakeAt is when the candidate's handover state changes by itself: the end
// of the grace period of an unanswered request, or when a refusal may be
// repeated. Zero when nothing is waited for.
func (p *Protocol) WakeAt(now time.Time) time.Time {
	a := p.ask
	switch {
	case a == nil:
		return time.Time{}
	case a.askedAt.IsZero():
		if at := a.entitled.Add(p.yieldDelay()); !a.entitled.IsZero() && at.After(now) {
			return at
		}
		if a.other != "" {
			return a.otherSeenAt.Add(p.cfg.Grace)
		}
		return time.Time{}
	case a.heard == "":
		return a.unanswered.Add(p.cfg.Grace)
	case a.heard == lockmeta.AnswerRefused:
		return a.answeredAt.Add(p.cfg.LeaseDuration)
	case a.heard == lockmeta.AnswerAccepted:
		// Look when the holder promised to name this candidate, and again
		// when the promise counts as broken; nothing once the annotation
		// no longer carries this candidate's accepted request (it was
		// handed the lock, or the holder's term moved on).
		h := p.cfg.Lock.Handover()
		if h.Candidate != p.me() || h.Answer != lockmeta.AnswerAccepted {
			return time.Time{}
		}
		for _, at := range []time.Time{a.answeredAt.Add(time.Duration(h.StopWithinMillis) * time.Millisecond), p.promiseBroken(h)} {
			if at.After(now) {
				return at
			}
		}
	}
	return time.Time{}
}

// Answer is the holder's side: it answers the request addressed to this
// holder, if there is one, and returns it when accepted, promising to stop
// within stopWithin. A request older than a lease is cleared without an
// answer; one from a candidate that Accept does not entitle now is refused
// (and accepted later if the candidate becomes entitled while the request
// is fresh).
func (p *Protocol) Answer(ctx context.Context, now time.Time, stopWithin, fenceLeft time.Duration) (*lockmeta.Handover, error) {
	h := p.cfg.Lock.Handover()
	if !h.Requested(p.me()) {
		return nil, nil
	}
	// An accepted request seen by a holder that leads and is not stopping
	// is a promise it could not keep (its write naming the candidate
	// failed and it took the lock back): it is answered again, so that the
	// candidate is neither stranded on an old acceptance nor kept waiting
	// when the holder no longer agrees.
	if p.stale(h, now) {
		p.log.Info("ignoring a stale handover request", zap.String("candidate", h.Candidate), zap.Any("requestTime", h.RequestTime))
		return nil, p.write(ctx, lockmeta.Handover{Holder: p.me()}, now)
	}
	if !p.accepts(h) {
		if h.Answer == lockmeta.AnswerRefused {
			return nil, nil
		}
		h.Answer, h.AnswerTime = lockmeta.AnswerRefused, &metav1.Time{Time: now}
		p.log.Info("refused a handover request from a candidate that is not entitled",
			zap.String("candidate", h.Candidate), zap.String("candidateKey", h.CandidateKey))
		return nil, p.write(ctx, h, now)
	}
	h.Answer, h.AnswerTime = lockmeta.AnswerAccepted, &metav1.Time{Time: now}
	h.StopWithinMillis = stopWithin.Milliseconds()
	if h.FenceMillis = 0; h.HonoursFence && fenceLeft > 0 {
		h.FenceMillis = (fenceLeft + time.Millisecond - 1).Milliseconds() // rounded up: never short of the fence
	}
	if err := p.write(ctx, h, now); err != nil {
		return nil, fmt.Errorf("accept the handover request of %s: %w", h.Candidate, err)
	}
	p.log.Info("accepted a handover request", zap.String("candidate", h.Candidate), zap.String("candidateKey", h.CandidateKey))
	return &h, nil
}

// accepts reports whether Accept entitles h's candidate now.
func (p *Protocol) accepts(h lockmeta.Handover) bool { return p.Accepts(h.CandidateKey) }

// Accepts reports whether this holder would accept a request from a
// candidate with candidateKey now (Config.Accept; false when it is nil).
func (p *Protocol) Accepts(candidateKey string) bool {
	return p.cfg.Accept != nil && p.cfg.Accept(candidateKey)
}

// Reconsiders reports whether a leading holder must answer a fresh request
// again: one it refused whose candidate has become entitled, or one it
// accepted in a term whose end could not name the candidate.
func (p *Protocol) Reconsiders(now time.Time) bool {
	h := p.cfg.Lock.Handover()
	if !h.Requested(p.me()) || p.stale(h, now) {
		return false
	}
	switch h.Answer {
	case lockmeta.AnswerAccepted:
		return true
	case lockmeta.AnswerRefused:
		return p.accepts(h)
	}
	return false
}

// Successor returns the candidate this holder should hand the lock to when
// its term ends: a fresh request addressed to it from a candidate that is
// entitled now. Nil when there is none.
func (p *Protocol) Successor(now time.Time) *lockmeta.Handover {
	h := p.cfg.Lock.Handover()
	if !h.Requested(p.me()) || p.stale(h, now) || !p.accepts(h) {
		return nil
	}
	return &h
}

// stale reports whether a request is too old to act on. A request that
// this candidate's own write of the lock object did not carry and a later
// version of the same object (the same uid) does was written after that
// write was sent: while that was at
// most a lease ago by this candidate's own clock, the request is fresh,
// however far apart the two candidates' wall clocks are. Otherwise (the
// write was longer ago, or there is no such write: the request was met
// before any write of this process, or its writes carried it) the request
// time, which is the asking candidate's wall clock, is compared with this
// candidate's: a request more than a lease before or after now, or
// without a time, is stale. So the witness proves freshness only, never
// staleness: a holder that has not written the lock for a while (with
// sessions, for a whole term) judges as before, and so does one that finds
// the request in another object than it wrote, which may have been created
// from a copy saved before that write (a restore).
func (p *Protocol) stale(h lockmeta.Handover, now time.Time) bool {
	if h.RequestTime == nil {
		return true
	}
	w := p.witness()
	if req, uid := requestOf(h), lockcap.ObjectUID(p.cfg.Lock); w.sight.req != req || w.sight.uid != uid {
		w.sight = sighting{req: req, uid: uid}
		if !w.wrote.after.IsZero() && w.wrote.req != req && w.wrote.uid == uid {
			w.sight.after = w.wrote.after
		}
	}
	if !w.sight.after.IsZero() && now.Sub(w.sight.after) <= p.cfg.LeaseDuration {
		return false
	}
	age := now.Sub(h.RequestTime.Time)
	return age > p.cfg.LeaseDuration || -age > p.cfg.LeaseDuration
}

// Wrote notes a successful write of the lock object sent at now: the
// object it wrote carries the request the annotation holds now.
func (p *Protocol) Wrote(now time.Time) {
	p.witness().wrote = sighting{req: requestOf(p.cfg.Lock.Handover()), after: now, uid: lockcap.ObjectUID(p.cfg.Lock)}
}

// write stores h in the annotation, counting the request.
func (p *Protocol) write(ctx context.Context, h lockmeta.Handover, now time.Time) error {
	p.cfg.Metrics.Request(p.cfg.Name, "update")
	err := p.cfg.Lock.RequestHandover(ctx, h)
	if err == nil {
		p.Wrote(now)
	}
	return err
}

// Retract takes this candidate's request back, when the object last read
// carries it, as a candidate that stops contending does. It reports
// whether the write conflicted, so that the caller reads the lock again and
// retries.
func (p *Protocol) Retract(ctx context.Context) (retry bool) {
	h := p.cfg.Lock.Handover()
	if h.Candidate != p.me() {
		return false
	}
	err := p.write(ctx, lockmeta.Handover{Holder: h.Holder}, time.Time{}) // no reading: the write bounds no request
	switch {
	case err == nil:
		p.log.Info("withdrew the handover request")
	case apierrors.IsConflict(err):
		return true
	default:
		p.log.Warn("could not withdraw the handover request", zap.Error(err))
	}
	return false
}

// TermKey names one holder's term, for this protocol and the elector
// alike: every change of holder increments leaderTransitions, so a holder
// that regains the lock is in a new term even within the same second. A
// handover request is about a term.
func TermKey(rec *resourcelock.Record) string {
	return fmt.Sprintf("%s#%d", rec.HolderIdentity, rec.LeaderTransitions)
}

type noMetrics struct{}

func (noMetrics) Request(string, string)   {}
func (noMetrics) HandoverRequested(string) {}
