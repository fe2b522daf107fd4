package session

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/meshd-io/meshd/internal/testing/kubetest"
)

// Tests of the order of sends: an echo counts for a judgement only when it
// carries a write that this session started after the judgement, and after
// the watch last came back from a break.

// echoRig is a Member wired to a session whose heartbeat the test drives by
// hand: no goroutine, no watch; the test notes sends and delivers Leases.
type echoRig struct {
	clk *clocktesting.FakeClock
	hb  *heartbeat
	v   *view
	m   *Member
}

func newEchoRig() *echoRig {
	clk := clocktesting.NewFakeClock(t0)
	own := LeaseName("a", 4*time.Second)
	hb := &heartbeat{name: own, token: "mine", kick: make(chan struct{}, 1)}
	v := newView(clk, own, "mine")
	v.sentAt, v.seqNow = hb.sentAt, hb.seqNow
	l := &live{hb: hb, view: v, wakes: map[*Member]func(){}}
	return &echoRig{clk: clk, hb: hb, v: v, m: &Member{cur: l}}
}

// send notes a write at the clock's reading, as renewOnce does, and
// returns the renew time it stores.
func (r *echoRig) send() time.Time {
	r.hb.mu.Lock()
	defer r.hb.mu.Unlock()
	wall := r.hb.renewTimeFor(r.clk.Now())
	r.hb.noteSendAs(wall, r.clk.Now())
	return wall
}

// echo delivers this session's Lease carrying renew, as the watch does.
func (r *echoRig) echo(renew time.Time) {
	r.v.observe(sessionLease(r.v.ownName, "mine", "a", renew, ptr.To(int32(4))), false)
}

// kicked reports (and consumes) a heartbeat asked for.
func (r *echoRig) kicked() bool {
	select {
	case <-r.hb.kick:
		return true
	default:
		return false
	}
}

// A heartbeat sent before the judgement proves nothing about it, however
// late its echo comes back and though the clock still reads the same; the
// one the judgement asks for counts, and one is asked for only until a
// send follows the judgement.
func TestEchoOfASendBeforeTheJudgementNeverCounts(t *testing.T) {
	r := newEchoRig()
	r.v.setHealth(true)
	early := r.send() // its write is on its way; the watch lags
	judged := uint64(1)
	if r.m.EchoedSince(judged, nil) {
		t.Fatal("an echo counted before any send came back")
	}
	if !r.kicked() {
		t.Fatal("the judgement asked for no heartbeat")
	}
	asked := r.send() // the heartbeat asked for, at the same clock reading
	if r.m.EchoedSince(judged, nil) {
		t.Fatal("an echo counted before any send came back")
	}
	if r.kicked() {
		t.Error("a heartbeat was asked for again though one was sent since the judgement")
	}
	r.echo(early)
	if r.m.EchoedSince(judged, nil) {
		t.Fatal("the late echo of a heartbeat sent before the judgement counts as its echo")
	}
	r.echo(asked)
	if !r.m.EchoedSince(judged, nil) {
		t.Error("the heartbeat the judgement asked for does not count")
	}
}

// A renew time names one send of a session, even once that send is
// forgotten (maxSends later): renew times only rise, after a wall clock
// step back and with a clock that does not move. Were one stored again, a
// Lease still carrying it (the last write that succeeded before an outage
// that failed the writes and broke the watch) would come back in the list
// after the break and be taken for the echo of the send the judgement
// asked for, noted after the watch came back: the follower would count the
// echo at its own Lease's place in the list, before the Leases named after
// it, a holder's among them, and a holder would credit a heartbeat whose
// write has not come back.
func TestARenewTimeStoredAgainAfterEvictionIsNotTakenForTheLaterSend(t *testing.T) {
	for _, c := range []struct {
		what string
		// during is the clock's move before each failed write; after,
		// its move once the outage is over.
		during, after func(*clocktesting.FakeClock)
	}{
		{"a wall clock stepped back", func(clk *clocktesting.FakeClock) { clk.Step(250 * time.Millisecond) },
			func(clk *clocktesting.FakeClock) { clk.SetTime(t0) }},
		{"a clock that does not move", func(*clocktesting.FakeClock) {}, func(*clocktesting.FakeClock) {}},
	} {
		t.Run(c.what, func(t *testing.T) {
			client := kubetest.NewClientset()
			clk := clocktesting.NewFakeClock(t0)
			h := newHeartbeat(testConfig(client, clk), zapNop())
			v := newView(clk, h.name, h.token)
			v.sentAt, v.seqNow = h.sentAt, h.seqNow
			var down atomic.Bool
			client.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				if down.Load() {
					return true, nil, apierrors.NewServiceUnavailable("down")
				}
				return false, nil, nil
			})
			ctx := context.Background()
			leases := client.CoordinationV1().Leases("ns")

			v.setHealth(true)
			if !h.renewOnce(ctx) {
				t.Fatal("the first heartbeat failed")
			}
			stored, err := leases.Get(ctx, h.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			v.observe(stored, false)
			if v.echoed().IsZero() {
				t.Fatal("the first heartbeat did not come back")
			}

			// An outage: every write fails, and the watch breaks.
			down.Store(true)
			v.setHealth(false)
			for range maxSends {
				c.during(clk)
				if h.renewOnce(ctx) {
					t.Fatal("a write succeeded during the outage")
				}
			}
			down.Store(false)
			c.after(clk)

			// The watch lists again; it is healthy at the list's first
			// Lease, named before this session's. The follower judges a
			// holder's session over and asks for a heartbeat.
			v.setHealth(true)
			mark := h.seqNow()
			echoBefore := v.echoed()
			if !h.renewOnce(ctx) {
				t.Fatal("the heartbeat asked for failed")
			}
			// The list, answered before that write, delivers this
			// session's Lease as the last successful write left it.
			v.observe(stored, false)
			if v.echoedPast(mark, nil, nil) {
				t.Errorf("the Lease written before the outage (renew time %v), delivered in the list, counts as the echo of the heartbeat asked for after the list (seq %d > mark %d)",
					stored.Spec.RenewTime.Time, v.echoSeq, mark)
			}
			if got := v.echoed(); !got.Equal(echoBefore) {
				t.Errorf("the holder's echoed heartbeat moved from %v to %v on a Lease written before the outage", echoBefore, got)
			}
		})
	}
}

// A judgement is one event, not one clock reading. A follower that judged
// one holder's session over, had its heartbeat come back and then, at the
// same clock reading (a coarse clock's, the simulation's), judges another
// holder's session over must wait for a heartbeat sent after the second
// judgement: the first judgement's echo was sent before it. Judgements are
// numbered by the caller, so the second takes a mark of its own.
func TestASecondJudgementAtTheSameClockReadingCountsNoEarlierSend(t *testing.T) {
	r := newEchoRig()
	r.v.setHealth(true)
	r.echo(r.send())
	judged := uint64(1)
	if r.m.EchoedSince(judged, nil) || !r.kicked() {
		t.Fatal("the first judgement counted an earlier echo, or asked for no heartbeat")
	}
	r.echo(r.send())
	if !r.m.EchoedSince(judged, nil) {
		t.Fatal("the heartbeat the first judgement asked for does not count")
	}
	// Another holder's session, judged over at the same reading.
	if r.m.EchoedSince(2, nil) {
		t.Error("a second judgement at the same clock reading counts the echo of a heartbeat sent before it")
	}
}

// The retry after a conflict writes the send's renew time again without a
// new place in the order of sends: a send noted before the judgement whose
// retried write lands after it does not count (conservative); the
// heartbeat the judgement asked for, sent next, counts, and is asked for
// once.
func TestARetryAfterAConflictKeepsItsSendsPlace(t *testing.T) {
	client := kubetest.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	h := newHeartbeat(testConfig(client, clk), zapNop())
	v := newView(clk, h.name, h.token)
	v.sentAt, v.seqNow = h.sentAt, h.seqNow
	m := &Member{cur: &live{hb: h, view: v, wakes: map[*Member]func(){}}}
	ctx := context.Background()
	leases := client.CoordinationV1().Leases("ns")
	v.setHealth(true)
	if !h.renewOnce(ctx) {
		t.Fatal("the first heartbeat failed")
	}
	clk.Step(time.Second)

	judged := uint64(1)
	var conflicted atomic.Bool
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicted.Swap(true) {
			return false, nil, nil
		}
		// The judgement is made while the write is in flight.
		if m.EchoedSince(judged, nil) {
			t.Error("an echo counted before the judgement's heartbeat was sent")
		}
		select {
		case <-h.kick:
		default:
			t.Error("the judgement asked for no heartbeat")
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, h.name, errors.New("stale"))
	})
	before := h.seqNow()
	if !h.renewOnce(ctx) {
		t.Fatal("the retry after the conflict failed")
	}
	if got := h.seqNow(); got != before+1 {
		t.Errorf("one renewal with a retry noted %d sends, want 1", got-before)
	}
	retried, err := leases.Get(ctx, h.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v.observe(retried, false)
	if m.EchoedSince(judged, nil) {
		t.Error("a send noted before the judgement counts because its retried write came after it")
	}
	select {
	case <-h.kick:
		t.Fatal("a heartbeat was asked for again while the one the judgement asked for is still to be sent")
	default:
	}
	if !h.renewOnce(ctx) { // the loop sends the heartbeat the judgement asked for
		t.Fatal("the heartbeat asked for failed")
	}
	asked, err := leases.Get(ctx, h.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v.observe(asked, false)
	if !m.EchoedSince(judged, nil) {
		t.Error("the heartbeat the judgement asked for does not count")
	}
}

// With a clock that never moves (timers never fire, so only the
// judgements' requests send), judgement after judgement is answered by
// a heartbeat it asks for, through the real shared watch,
// for many more judgements than maxSends: renew times only rise, and each
// echo carries the send it names.
func TestAFrozenClockAnswersEveryJudgementWithTheOneHeartbeatItAsksFor(t *testing.T) {
	client := kubetest.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	m := startedMember(t, client, clk)
	l := m.current()
	for i := range 3 * maxSends {
		judged := uint64(i + 1) // a distinct judgement, the clock unmoved
		before := l.hb.seqNow()
		came := make(chan struct{}, 1)
		notify := func() {
			select {
			case came <- struct{}{}:
			default:
			}
		}
		if m.EchoedSince(judged, notify) {
			t.Fatalf("judgement %d: counted at once, before its heartbeat was sent", i)
		}
		deadline := time.After(5 * time.Second)
		for !m.EchoedSince(judged, notify) {
			select {
			case <-came:
			case <-deadline:
				t.Fatalf("judgement %d: its heartbeat never came back (sends %d -> %d)", i, before, l.hb.seqNow())
			}
		}
		l.view.mu.Lock()
		echoSeq := l.view.echoSeq
		l.view.mu.Unlock()
		if echoSeq <= before {
			t.Fatalf("judgement %d: counted the echo of send %d, noted before it (%d)", i, echoSeq, before)
		}
	}
}

// A member that leaves its session and joins a new one judges anew in it:
// the new session's first heartbeat after the call counts, whatever the
// mark in the old one was.
func TestAJudgementInANewSessionTakesItsMarkThere(t *testing.T) {
	old, fresh := newEchoRig(), newEchoRig()
	old.v.setHealth(true)
	for range 5 {
		old.echo(old.send())
	}
	judged := uint64(1)
	m := old.m
	if m.EchoedSince(judged, nil) {
		t.Fatal("an echo from before the judgement counted")
	}
	m.mu.Lock()
	m.cur = fresh.m.cur // stopped and started again: a new session
	m.mu.Unlock()
	fresh.v.setHealth(true)
	early := fresh.send()
	if m.EchoedSince(judged, nil) {
		t.Fatal("an echo counted in the new session before any came back")
	}
	asked := fresh.send()
	fresh.echo(early)
	if m.EchoedSince(judged, nil) {
		t.Error("a send of the new session noted before the call counts")
	}
	fresh.echo(asked)
	if !m.EchoedSince(judged, nil) {
		t.Error("the new session's heartbeat sent after the call does not count (the old session's mark was kept)")
	}
}

// A judgement asks for one heartbeat. The loop takes the request off the
// kick channel before renewOnce notes the send; a call of EchoedSince in
// between (a second look by the election loop) sees no send since the
// mark, and must not ask again: the request is remembered until the send
// it asked for is noted, so the session writes once.
func TestARequestTakenButNotYetSentIsNotAskedForAgain(t *testing.T) {
	r := newEchoRig()
	r.v.setHealth(true)
	r.echo(r.send())
	judged := uint64(1)
	if r.m.EchoedSince(judged, nil) || !r.kicked() { // the loop takes the request...
		t.Fatal("the judgement counted an earlier echo, or asked for no heartbeat")
	}
	if r.m.EchoedSince(judged, nil) { // ...and is about to note its send
		t.Fatal("an echo counted before the heartbeat asked for was sent")
	}
	if r.kicked() {
		t.Error("a heartbeat was asked for again while the loop was sending the one asked for: the session writes twice")
	}
}
