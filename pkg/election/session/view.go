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

// maxTokens bounds the tokens remembered per session Lease (restarts of a
// process under the same identity).
const maxTokens = 8

// view is what this process has seen of the sessions of one namespace,
// fed by the process's shared watch of Leases there.
type view struct {
	clock clock.Clock

	mu      sync.Mutex
	healthy bool
	leases  map[string]*seenLease // by Lease name
}

// seenLease is one session Lease as observed here.
type seenLease struct {
	lease  time.Duration
	tokens []seenToken // newest last
}

// seenToken is one session (one token) of a Lease: when this process last
// saw it renewed, and whether it ended gracefully.
type seenToken struct {
	token   string
	renew   time.Time // the renewTime last seen, to notice changes
	at      time.Time // local time of the last change seen
	ended   bool
	holding bool // the Lease named a holder when last seen with this token
}

func newView(clk clock.Clock) *view {
	return &view{clock: clk, leases: map[string]*seenLease{}}
}

// aliveUntil is until when the session ref is alive by this process's
// observation: a lease after it was last seen renewed; zero when it is
// unknown here, ended, or not a session reference. known is false while the
// watch cannot tell (not listed yet, or broken).
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
	l := v.leases[name]
	if l == nil {
		return time.Time{}, true
	}
	for _, t := range l.tokens {
		if t.token == token {
			if t.ended {
				return time.Time{}, true
			}
			return t.at.Add(l.lease), true
		}
	}
	return time.Time{}, true
}

// ownRenew is the renewTime last seen of the Lease name with token (this
// process's own session); false when it was never seen or has ended.
func (v *view) ownRenew(name, token string) (time.Time, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	l := v.leases[name]
	if l == nil {
		return time.Time{}, false
	}
	for _, t := range l.tokens {
		if t.token == token {
			return t.renew, !t.ended && !t.renew.IsZero()
		}
	}
	return time.Time{}, false
}

func (v *view) setHealth(ok bool) {
	v.mu.Lock()
	v.healthy = ok
	v.mu.Unlock()
}

// observe takes in a Lease delivered by the watch. Deletions change nothing:
// a deleted session is not ended (see the package doc).
func (v *view) observe(obj any, deleted bool) {
	if deleted {
		return
	}
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil || !strings.HasPrefix(m.GetName(), LeasePrefix) {
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
	defer v.mu.Unlock()
	now := v.clock.Now()
	l := v.leases[lease.Name]
	if l == nil {
		l = &seenLease{}
		v.leases[lease.Name] = l
	}
	l.lease = time.Duration(max(seconds, 0)) * time.Second
	l.note(token, renew, holding, now)
}

// note records token as seen with renew; a change of renew or of the holder
// is a sign of life (or, with no holder, the graceful end).
func (l *seenLease) note(token string, renew time.Time, holding bool, now time.Time) {
	for i := range l.tokens {
		t := &l.tokens[i]
		if t.token != token {
			continue
		}
		if !t.renew.Equal(renew) || t.holding != holding {
			t.renew, t.at, t.holding = renew, now, holding
		}
		t.ended = !holding
		return
	}
	if len(l.tokens) == maxTokens {
		l.tokens = append(l.tokens[:0], l.tokens[1:]...)
	}
	l.tokens = append(l.tokens, seenToken{token: token, renew: renew, at: now, holding: holding, ended: !holding})
}
