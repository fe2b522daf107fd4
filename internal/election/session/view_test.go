package session

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// sessionLease is a session Lease as a heartbeat writes it.
func sessionLease(name, token, holder string, renew time.Time, seconds *int32) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Annotations: map[string]string{TokenAnnotation: token}},
		Spec:       coordinationv1.LeaseSpec{LeaseDurationSeconds: seconds, RenewTime: &metav1.MicroTime{Time: renew}},
	}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	return l
}

func TestViewJudgesEachTokenByItsOwnRenewals(t *testing.T) {
	name := LeaseName("a", 10*time.Second)
	ref1, ref2 := Ref(name, "t1"), Ref(name, "t2")
	clk := clocktesting.NewFakeClock(t0)
	v := newView(clk, "", "")
	ten := ptr.To(int32(10))

	if _, known := v.aliveUntil(ref1); known {
		t.Fatal("a view whose watch has not listed claims to know")
	}
	v.setHealth(true)
	if until, known := v.aliveUntil(ref1); !known || !until.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("a session never seen: until %v known %v; want a lease from the list, which may have missed it", until, known)
	}
	v.observe(sessionLease(name, "t1", "a", t0, ten), false)
	want := t0.Add(10 * time.Second)
	steps := []struct {
		what    string
		advance time.Duration
		obj     any
		deleted bool
		ref     string
		want    time.Time
	}{
		{"first sight starts a lease", 0, nil, false, ref1, want},
		{"the same renewTime again is no sign of life", 3 * time.Second, sessionLease(name, "t1", "a", t0, ten), false, ref1, want},
		{"a renewal restarts the lease from when it is seen", 0, sessionLease(name, "t1", "a", t0.Add(time.Second), ten), false, ref1, t0.Add(13 * time.Second)},
		{"a deletion is not the end", time.Second, sessionLease(name, "t1", "a", t0.Add(time.Second), ten), true, ref1, t0.Add(13 * time.Second)},
		{"a tombstone is not the end either", 0, cache.DeletedFinalStateUnknown{Key: "ns/" + name, Obj: sessionLease(name, "t1", "a", t0, ten)}, true, ref1, t0.Add(13 * time.Second)},
		{"a restarted process's token is new", time.Second, sessionLease(name, "t2", "a", t0.Add(5*time.Second), ten), false, ref2, t0.Add(15 * time.Second)},
		{"the old token keeps its last renewal", 0, nil, false, ref1, t0.Add(13 * time.Second)},
		{"a graceful end ends that token at once", time.Second, sessionLease(name, "t2", "", t0.Add(6*time.Second), ten), false, ref2, time.Time{}},
		{"a foreign Lease is ignored", 0, sessionLease("other", "t9", "x", t0, ten), false, Ref("other", "t9"), time.Time{}},
		{"a Lease without a token is ignored", 0, sessionLease(LeaseName("b", time.Second), "", "b", t0, ten), false, Ref(LeaseName("b", time.Second), ""), time.Time{}},
		{"a missing lease duration counts as none", 0, sessionLease(LeaseName("c", time.Second), "t3", "c", t0, nil), false, Ref(LeaseName("c", time.Second), "t3"), t0.Add(6 * time.Second)},
		{"garbage is not a reference", 0, nil, false, "no-slash", time.Time{}},
	}
	for _, s := range steps {
		clk.Step(s.advance)
		if s.obj != nil {
			v.observe(s.obj, s.deleted)
		}
		if until, known := v.aliveUntil(s.ref); !known || !until.Equal(s.want) {
			t.Errorf("%s: until %v (known %v), want %v", s.what, until, known, s.want)
		}
	}
	v.setHealth(false)
	if _, known := v.aliveUntil(ref1); known {
		t.Error("a view whose watch broke still claims to know")
	}
}

func TestViewRemembersABoundedNumberOfTokens(t *testing.T) {
	name := LeaseName("a", 10*time.Second)
	v := newView(clocktesting.NewFakeClock(t0), "", "")
	v.setHealth(true)
	for i := range maxTokens + 3 {
		v.observe(sessionLease(name, string(rune('a'+i)), "a", t0, ptr.To(int32(10))), false)
	}
	if n := len(v.leases[name].tokens); n != maxTokens {
		t.Fatalf("%d tokens remembered, want %d", n, maxTokens)
	}
	v.clock.(*clocktesting.FakeClock).Step(11 * time.Second) // past a lease from the list
	if until, _ := v.aliveUntil(Ref(name, "a")); !until.IsZero() {
		t.Error("the oldest token is still remembered")
	}
	if until, _ := v.aliveUntil(Ref(name, string(rune('a'+maxTokens+2)))); until.IsZero() {
		t.Error("the newest token is forgotten")
	}
}

func TestLeaseNameAndRef(t *testing.T) {
	if a, b := LeaseName("pod-1", 30*time.Second), LeaseName("pod-1", 4*time.Second); a == b {
		t.Errorf("sessions of two ttls share the Lease %q", a)
	}
	if n := LeaseName("Host_ÄBC", 30*time.Second); len(n) > 253 || n[:len(LeasePrefix)] != LeasePrefix {
		t.Errorf("bad lease name %q", n)
	}
	for _, c := range []struct {
		ref       string
		name, tok string
		ok        bool
	}{
		{"l/t", "l", "t", true}, {"l/", "", "", false}, {"/t", "", "", false}, {"", "", "", false}, {"lt", "", "", false},
	} {
		name, tok, ok := ParseRef(c.ref)
		if ok != c.ok || (ok && (name != c.name || tok != c.tok)) {
			t.Errorf("ParseRef(%q) = %q, %q, %v", c.ref, name, tok, ok)
		}
	}
}

// A heartbeat counts once the watch delivered it back, and only this
// process's own session under its own token.
func TestViewEchoesOnlyItsOwnHeartbeats(t *testing.T) {
	name := LeaseName("a", 10*time.Second)
	v := newView(clocktesting.NewFakeClock(t0), name, "mine")
	wireHeartbeat(v).sendAtEach(t0.Add(time.Second), t0.Add(2*time.Second), t0.Add(3*time.Second)) // wall and local agree
	ten := ptr.To(int32(10))
	for _, c := range []struct {
		what string
		obj  any
		want time.Time
	}{
		{"another token of the same Lease", sessionLease(name, "theirs", "a", t0.Add(time.Second), ten), time.Time{}},
		{"another Lease", sessionLease(LeaseName("b", 10*time.Second), "mine", "b", t0.Add(time.Second), ten), time.Time{}},
		{"its own heartbeat", sessionLease(name, "mine", "a", t0.Add(2*time.Second), ten), t0.Add(2 * time.Second)},
		{"an older one delivered late", sessionLease(name, "mine", "a", t0.Add(time.Second), ten), t0.Add(2 * time.Second)},
		{"its own end", sessionLease(name, "mine", "", t0.Add(3*time.Second), ten), t0.Add(2 * time.Second)},
	} {
		v.observe(c.obj, false)
		if got := v.echoed(); !got.Equal(c.want) {
			t.Errorf("%s: echoed %v, want %v", c.what, got, c.want)
		}
	}
}

// An echo is timed by when this process sent the heartbeat, not by the
// wall-clock renew time the Lease carries: after the wall clock stepped
// back, a new heartbeat carries an earlier renew time than the echo seen
// before, and must still count as the newer echo; and a renew time this
// process did not send recently counts for nothing. Before, the echo was
// the carried renew time: a backward step of the wall clock kept the echo
// from advancing, while a stale one looked current for as long as the step.
func TestViewTimesEchoesBySendTime(t *testing.T) {
	name := LeaseName("a", 10*time.Second)
	clk := clocktesting.NewFakeClock(t0)
	v := newView(clk, name, "mine")
	hb := &heartbeat{}
	ten := ptr.To(int32(10))
	wallBefore, wallAfter := t0.Add(10*time.Second), t0.Add(time.Second) // the wall clock stepped back 9s
	localBefore, localAfter := t0.Add(10*time.Second), t0.Add(11*time.Second)
	hb.noteSendAs(wallBefore, localBefore)
	hb.noteSendAs(wallAfter, localAfter)
	v.sentAt, v.seqNow = hb.sentAt, hb.seqNow

	v.observe(sessionLease(name, "mine", "a", wallBefore, ten), false)
	if got := v.echoed(); !got.Equal(localBefore) {
		t.Fatalf("echo = %v, want the send time %v", got, localBefore)
	}
	v.observe(sessionLease(name, "mine", "a", wallAfter, ten), false)
	if got := v.echoed(); !got.Equal(localAfter) {
		t.Fatalf("echo after a backward step of the wall clock = %v, want the later send %v", got, localAfter)
	}
	v.observe(sessionLease(name, "mine", "a", t0.Add(time.Hour), ten), false)
	if got := v.echoed(); !got.Equal(localAfter) {
		t.Fatalf("a renew time never sent moved the echo to %v", got)
	}
}

// A heartbeat remembers only its recent sends.
func TestHeartbeatRemembersRecentSends(t *testing.T) {
	hb := &heartbeat{}
	for i := range maxSends + 4 {
		at := t0.Add(time.Duration(i) * time.Second)
		hb.noteSendAs(at, at)
	}
	if _, ok := hb.sentAt(t0); ok {
		t.Error("the oldest send is still remembered")
	}
	last := t0.Add(time.Duration(maxSends+3) * time.Second)
	if got, ok := hb.sentAt(last.Add(400 * time.Nanosecond)); !ok || !got.local.Equal(last) {
		t.Errorf("sentAt(latest, at microsecond precision) = %v, %v", got, ok)
	}
	if len(hb.sends) != maxSends || len(hb.sendOrder) != maxSends {
		t.Errorf("remembers %d sends (%d in order), want %d", len(hb.sends), len(hb.sendOrder), maxSends)
	}
}

// Any reference parses or is refused without a panic, and what parses is
// what Ref builds.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"l/t", "l/", "/t", "", "a/b/c", "meshd-session-30s-a-0123456789/deadbeef"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		name, token, ok := ParseRef(ref)
		if !ok {
			return
		}
		if name == "" || token == "" || Ref(name, token) != ref {
			t.Fatalf("ParseRef(%q) = %q, %q", ref, name, token)
		}
	})
}

// A follower takes a lock whose holder's session it judged over only once
// a heartbeat of its own, sent after the judgement, came back. After a
// broken watch the list that follows delivers Leases in the order of
// their names: this session's Lease, carrying a heartbeat sent after the
// judgement but before the list, may come before the holder's Lease,
// which this view has never seen. That heartbeat is no echo; one sent
// after the watch came back is.
func TestHeartbeatSentBeforeARelistIsNoEcho(t *testing.T) {
	own, holder := LeaseName("a", 4*time.Second), LeaseName("b", 4*time.Second)
	holderRef := Ref(holder, "theirs")
	clk := clocktesting.NewFakeClock(t0)
	v := newView(clk, own, "mine")
	hb := wireHeartbeat(v)
	send := func() time.Time { at := clk.Now(); hb.noteSendAs(at, at); return at }
	four := ptr.To(int32(4))

	v.setHealth(true)
	v.observe(sessionLease(own, "mine", "a", send(), four), false)
	// The watch ends unnoticed; the holder's session starts unseen. A
	// session never seen counts as over once a lease has passed since the
	// watch began to work.
	clk.Step(5 * time.Second)
	judged := hb.seqNow()
	if until, known := v.aliveUntil(holderRef); !known || !until.IsZero() {
		t.Fatalf("a session never seen: until %v known %v; want not alive", until, known)
	}
	clk.Step(time.Second)
	sentBeforeList := send() // after the judgement, before the list

	// The relist: this session's Lease comes first, by its name.
	clk.Step(time.Second)
	v.setHealth(false)
	v.setHealth(true)
	v.observe(sessionLease(own, "mine", "a", sentBeforeList, four), false)
	if v.echoedPast(judged, nil, nil) {
		t.Fatal("a heartbeat sent before the list counts as an echo, before the holder's Lease came in that list")
	}
	v.observe(sessionLease(holder, "theirs", "b", clk.Now(), four), false)
	if until, _ := v.aliveUntil(holderRef); !until.After(clk.Now()) {
		t.Fatalf("the holder's session, delivered by the list, is not alive: until %v", until)
	}

	clk.Step(time.Second)
	v.observe(sessionLease(own, "mine", "a", send(), four), false)
	if !v.echoedPast(judged, nil, nil) {
		t.Error("a heartbeat sent after the list does not count as an echo")
	}
}

// A heartbeat asked for by a judgement is sent after it, though a coarse
// or a fake clock may still read the same: it stores a renew time of its
// own and counts as an echo of that judgement, while one sent before the
// judgement at the same clock reading does not. Before, both stored the
// same renew time and neither counted (only a heartbeat sent at a later
// clock reading did): the follower waited a RetryPeriod for the next
// regular heartbeat, and asked for one more at every look meanwhile.
func TestHeartbeatAskedForByAJudgementCountsAtTheSameClockReading(t *testing.T) {
	own := LeaseName("a", 4*time.Second)
	clk := clocktesting.NewFakeClock(t0)
	v := newView(clk, own, "mine")
	hb := wireHeartbeat(v)
	four := ptr.To(int32(4))
	send := func() time.Time {
		hb.mu.Lock()
		defer hb.mu.Unlock()
		wall := hb.renewTimeFor(clk.Now())
		hb.noteSendAs(wall, clk.Now())
		return wall
	}
	v.setHealth(true)
	before := send()
	judged := hb.seqNow()
	after := send() // asked for by the judgement; the clock has not moved
	if wallKey(after) == wallKey(before) {
		t.Fatalf("two sends at one clock reading store one renew time %v", after)
	}
	v.observe(sessionLease(own, "mine", "a", before, four), false)
	if v.echoedPast(judged, nil, nil) {
		t.Fatal("a heartbeat sent before the judgement, at the same clock reading, counts as its echo")
	}
	v.observe(sessionLease(own, "mine", "a", after, four), false)
	if !v.echoedPast(judged, nil, nil) {
		t.Error("the heartbeat the judgement asked for does not count as its echo")
	}
}

// A restarted holder's token that began while the watch was broken, its
// Lease deleted before the watch listed again, is never delivered: it
// counts as renewed when the watch worked again, for the lease its name
// states, as the tokens seen before the break do.
func TestViewCountsATokenMissedDuringABreakFromTheHeal(t *testing.T) {
	name := LeaseName("a", 10*time.Second)
	clk := clocktesting.NewFakeClock(t0)
	v := newView(clk, "", "")
	v.setHealth(true)
	v.observe(sessionLease(name, "old", "a", t0, ptr.To(int32(10))), false)
	clk.Step(time.Second)
	v.setHealth(false)
	clk.Step(20 * time.Second) // the holder restarts as "new"; its Lease is deleted
	v.setHealth(true)
	v.observe(sessionLease(name, "old", "a", t0, ptr.To(int32(10))), true)
	healed := clk.Now()
	clk.Step(9 * time.Second)
	for _, tok := range []string{"old", "new"} {
		if until, known := v.aliveUntil(Ref(name, tok)); !known || !until.Equal(healed.Add(10*time.Second)) {
			t.Errorf("token %s: until %v (known %v), want %v", tok, until, known, healed.Add(10*time.Second))
		}
	}
	clk.Step(2 * time.Second)
	if until, _ := v.aliveUntil(Ref(name, "new")); !until.IsZero() {
		t.Errorf("a token never seen is alive until %v, more than a lease after the heal", until)
	}
}

// An election asks for an echo at every look while it waits for one, with
// its wake-up each time; the echo calls that wake-up once. Called once per
// look, the calls after the first raced the election's loop, which might
// have taken the first already, and whether one more wake-up was left
// waiting depended on the scheduler (the simulation's session seed
// 2900000038 renewed at once after taking the lock in some runs only).
func TestAnEchoWakesEachWaitingElectionOnce(t *testing.T) {
	own := LeaseName("a", 4*time.Second)
	clk := clocktesting.NewFakeClock(t0)
	v := newView(clk, own, "mine")
	hb := wireHeartbeat(v)
	four := ptr.To(int32(4))
	v.setHealth(true)
	judged := hb.seqNow()
	var one, other, anonymous int
	electionA, electionB := new(int), new(int)
	for range 3 {
		if v.echoedPast(judged, electionA, func() { one++ }) {
			t.Fatal("an echo before any heartbeat")
		}
		v.echoedPast(judged, nil, func() { anonymous++ })
	}
	v.echoedPast(judged, electionB, func() { other++ })
	at := clk.Now()
	hb.noteSendAs(at, at)
	v.observe(sessionLease(own, "mine", "a", at, four), false)
	if one != 1 || other != 1 {
		t.Fatalf("the echo woke election A %d times and B %d times, want once each", one, other)
	}
	if anonymous != 3 {
		t.Fatalf("waiters without a key were called %d times, want each of the 3", anonymous)
	}
}
