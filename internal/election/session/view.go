package session

import (
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// maxWaiters bounds the callbacks waiting for an echo; a waiter left out
// finds out at its next retry.
const maxWaiters = 1 << 16

// maxTokens bounds the tokens remembered per session Lease (restarts of a
// process under the same identity).
const maxTokens = 8

// view is what this process has seen of the sessions of one namespace,
// fed by the hub's shared watch of Leases there (Sessions' hub).
type view struct {
	clock clock.Clock

	// own names this process's session; echo is when its latest heartbeat
	// that came back through the watch was sent, by this process's clock,
	// and echoSeq its place in the order of sends (sentAt maps the renew
	// time the Lease carries to both; seqNow is the place of the latest
	// send).
	ownName, ownToken string
	sentAt            func(renew time.Time) (sendRecord, bool)
	seqNow            func() uint64

	mu          sync.Mutex
	healthy     bool
	everHealthy bool
	healed      time.Time             // when the watch last became healthy (see aliveUntil)
	leases      map[string]*seenLease // by Lease name
	echo        time.Time
	echoSeq     uint64
	// relisted is the place of the latest send when the watch last became
	// healthy again after a break: a heartbeat sent before it may come back
	// in the list that followed, which is in the order of names, not of
	// writes, so it counts as no echo (see note).
	relisted uint64
	swept    time.Time // when forget last pruned
	// waiters are called once when the echo next advances, in the order
	// they came.
	waiters []waiter
	// onEnd, if set, is called (without v.mu) when a session ends
	// gracefully, so that its followers act at once.
	onEnd func()
}

// seenLease is one session Lease as observed here.
type seenLease struct {
	tokens  []seenToken // newest last
	deleted bool        // the Lease was deleted since it was last seen
}

// seenToken is one session (one token) of a Lease: when this process last
// saw it renewed, for how long that keeps it alive, and whether it ended
// gracefully.
type seenToken struct {
	token   string
	renew   time.Time // the renewTime last seen, to notice changes
	at      time.Time // local time of the last change seen
	lease   time.Duration
	ended   bool
	holding bool // the Lease named a holder when last seen with this token
}

// over reports whether t no longer keeps anything alive at now.
func (t seenToken) over(now time.Time) bool { return t.ended || now.After(t.at.Add(t.lease)) }

func newView(clk clock.Clock, ownName, ownToken string) *view {
	return &view{clock: clk, ownName: ownName, ownToken: ownToken, leases: map[string]*seenLease{}}
}

// echoed is the renew time of this process's latest heartbeat that the
// watch delivered back: every write to a Lease of the namespace committed
// before that heartbeat has been delivered too (a watch delivers in
// order), so a holder that credits only echoed heartbeats has seen every
// write that took its lock before them.
func (v *view) echoed() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.echo
}

// waiter is a call due when the echo next advances. A waiter with a key
// is due once however often it was asked for (see await).
type waiter struct {
	key    any
	notify func()
}

// echoedSince reports whether a heartbeat of this process sent at or after
// t has come back; if not, notify is called (once) when the next one does.
func (v *view) echoedSince(t time.Time, notify func()) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.echo.Before(t) {
		return true
	}
	v.await(waiter{notify: notify})
	return false
}

// echoedPast reports whether a heartbeat of this process later in the
// order of sends than mark has come back; if not, notify is called once
// when the next one does, once for all calls with one key (nil: no key).
func (v *view) echoedPast(mark uint64, key any, notify func()) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.echoSeq > mark {
		return true
	}
	v.await(waiter{key: key, notify: notify})
	return false
}

// await has w called once when the echo next advances; a second waiter
// with the key of one already waiting adds nothing. An election asks at
// every look while it waits for an echo, and were its wake-up called once
// per look, the calls after the first would race its loop, which may have
// taken the first already: whether one more wake-up is left waiting would
// depend on the scheduler. v.mu is held.
func (v *view) await(w waiter) {
	if w.notify == nil || len(v.waiters) >= maxWaiters {
		return
	}
	for _, o := range v.waiters {
		if w.key != nil && o.key == w.key {
			return
		}
	}
	v.waiters = append(v.waiters, w)
}

// aliveUntil is until when the session ref is alive by this process's
// observation: a lease after it was last seen renewed; zero when it ended
// or is not a session reference. known is false while the watch cannot
// tell (not listed yet, or broken).
//
// A session never seen here (or no longer remembered) counts as renewed
// when the watch last became healthy, for the lease its name states: the watch may have missed its
// creation and renewals (it was broken, or had not listed yet), and a list
// cannot deliver a Lease deleted meanwhile, whose holder creates it again
// only at its next heartbeat. Without this, a follower whose watch was
// broken while a holder restarted with a new token would judge that
// holder's session over as soon as its watch works again, and take the
// lock by the record's own lease, which a session holder does not renew.
func (v *view) aliveUntil(ref string) (until time.Time, known bool) {
	name, token, ok := ParseRef(ref)
	if !ok {
		return time.Time{}, true
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.healthy {
		return time.Time{}, false
	}
	if l := v.leases[name]; l != nil {
		for _, t := range l.tokens {
			if t.token == token {
				if t.ended {
					return time.Time{}, true
				}
				return t.at.Add(t.lease), true
			}
		}
	}
	if lease, ok := nameLease(name); ok && v.healed.Add(lease).After(v.clock.Now()) {
		return v.healed.Add(lease), true
	}
	return time.Time{}, true
}

// setHealth follows the watch's health. When a broken watch works again,
// every session not ended counts as seen renewed now: the watch reports
// itself healthy at its first event after the break, before its new list
// has delivered every session Lease, and a session renewed meanwhile must
// not look over in between. A session this view has never seen may still
// be on its way in that list, after this process's own Lease: from then
// on only heartbeats sent after now count as echoes, and such a session
// counts as renewed now (healed; see aliveUntil).
func (v *view) setHealth(ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if ok && !v.healthy && v.everHealthy {
		now := v.clock.Now()
		if v.seqNow != nil {
			v.relisted = v.seqNow()
		}
		for _, l := range v.leases {
			for i := range l.tokens {
				if !l.tokens[i].ended {
					l.tokens[i].at = now
				}
			}
		}
	}
	if ok && !v.healthy {
		v.healed = v.clock.Now()
	}
	v.healthy = ok
	v.everHealthy = v.everHealthy || ok
}

// sweepEvery is how often deletions prune the sessions that can no longer
// keep anything alive.
const sweepEvery = time.Second

// observe takes in a Lease delivered by the watch. A deletion ends
// nothing (see the package doc); the Lease is forgotten once every token
// it had is over.
func (v *view) observe(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil || !strings.HasPrefix(m.GetName(), LeasePrefix) {
		return
	}
	if deleted {
		v.forget(m.GetName())
		return
	}
	lease, ok := obj.(*coordinationv1.Lease)
	token := m.GetAnnotations()[TokenAnnotation]
	if !ok || token == "" {
		return
	}
	var renew time.Time
	if lease.Spec.RenewTime != nil {
		renew = lease.Spec.RenewTime.Time
	}
	holding := lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != ""
	seconds := int32(0)
	if lease.Spec.LeaseDurationSeconds != nil {
		seconds = *lease.Spec.LeaseDurationSeconds
	}
	v.mu.Lock()
	ended := v.note(lease.Name, token, renew, holding, seconds)
	v.mu.Unlock()
	if ended && v.onEnd != nil {
		v.onEnd()
	}
}

// note takes in one session Lease as seen; it reports whether a session
// ended with it. v.mu is held.
func (v *view) note(name, token string, renew time.Time, holding bool, seconds int32) (ended bool) {
	now := v.clock.Now()
	l := v.leases[name]
	if l == nil {
		l = &seenLease{}
		v.leases[name] = l
	}
	l.deleted = false
	ended = l.note(token, renew, holding, time.Duration(max(seconds, 0))*time.Second, now)
	v.sweep(now)
	if name != v.ownName || token != v.ownToken || !holding || v.sentAt == nil {
		return ended
	}
	// An echo counts by the send of the heartbeat it carries: its local
	// send time (monotonic) and its place in the order of sends. A renew
	// time this process did not send recently, or a send not later than
	// the echo already seen, changes nothing. Nor does one sent before the
	// watch last came back from a break: the list it came in may deliver
	// the Leases named after this session's later, a holder's session
	// among them, so it proves nothing about them. A heartbeat sent after
	// the list was answered comes after all of it.
	if sent, ok := v.sentAt(renew); ok && sent.seq > v.echoSeq && sent.seq > v.relisted {
		v.echo, v.echoSeq = sent.local, sent.seq
		for _, w := range v.waiters {
			w.notify() // must not block (the elector's Trigger)
		}
		v.waiters = nil
	}
	return ended
}

// note records token as seen with renew and lease; a change of renew or of
// the holder is a sign of life (or, with no holder, the graceful end) and
// is when the lease takes effect: an edit of the lease alone (by anyone
// but the heartbeat, which always writes renewTime too) changes nothing.
func (l *seenLease) note(token string, renew time.Time, holding bool, lease time.Duration, now time.Time) (ended bool) {
	for i := range l.tokens {
		t := &l.tokens[i]
		if t.token != token {
			continue
		}
		if !t.renew.Equal(renew) || t.holding != holding {
			t.renew, t.at, t.holding = renew, now, holding
			if lease > 0 {
				t.lease = lease
			}
		}
		ended = !t.ended && !holding
		t.ended = !holding
		return ended
	}
	if len(l.tokens) == maxTokens {
		l.tokens = append(l.tokens[:0], l.tokens[1:]...)
	}
	l.tokens = append(l.tokens, seenToken{token: token, renew: renew, at: now, lease: lease, holding: holding, ended: !holding})
	return false
}

// forget marks a deleted session Lease.
func (v *view) forget(name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if l := v.leases[name]; l != nil {
		l.deleted = true
	}
	v.sweep(v.clock.Now())
}

// sweep drops every deleted session Lease whose tokens are all over, at
// most once per sweepEvery. v.mu is held.
func (v *view) sweep(now time.Time) {
	if now.Sub(v.swept) < sweepEvery {
		return
	}
	v.swept = now
	for n, l := range v.leases {
		if l.deleted && l.allOver(now) {
			delete(v.leases, n)
		}
	}
}

// allOver reports whether no token of l keeps anything alive at now.
func (l *seenLease) allOver(now time.Time) bool {
	for _, t := range l.tokens {
		if !t.over(now) {
			return false
		}
	}
	return true
}
