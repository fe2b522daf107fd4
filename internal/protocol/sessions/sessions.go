// Package sessions is session mode (docs/sessions.md), a protocol the
// elector core calls through its Sessions interface: a holder whose lock
// names its session does not rewrite its record every RetryPeriod; the
// session's heartbeat keeps it alive, and followers judge it alive while
// the session is, by their own observation.
//
// Guarantees: a follower counts a holder's session as over only once a
// heartbeat of its own session, sent after it first judged so, has come
// back through the same watch (the watch delivers in order, so every
// heartbeat of the holder committed before has been seen); until then, and
// while it cannot tell, the holder counts as alive for one more
// RetryPeriod. A record is marked with this candidate's session only while
// the session is current and no holder without sessions was seen (once one
// was, this candidate renews its record itself from then on).
//
// What it assumes of the core: it is called from the election loop only;
// the lock's mark (Lock.SessionMark) is the one of the object version the
// core last read or was delivered; the core reports every observed holder
// (NoteHolder) and marks every write (Mark); the core owns the record, the
// renew deadline and what a session's heartbeat is credited to. The lock
// must be a Lease that rides the watch the heartbeat is echoed through
// (Problems states what validation requires). The core calls it through
// Role, which stands for an election without sessions too (then nothing
// names a session and nothing renews a holder but its own writes), and
// passes in what it owns: the holder it observed and the session that
// holder's record named, the lease end it computed, the leader it
// observed. The protocol holds no reference to the core.
package sessions

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/meshd-io/meshd/internal/electionlog"
	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Heartbeat is the session shared by the elections of a process (package
// election/session implements it).
type Heartbeat interface {
	// Ref names the session in the records this candidate writes; "" while
	// it has none.
	Ref() string
	// Renewed is when the session's latest heartbeat was sent, counting
	// only one the watch has delivered back, and whether the session is
	// current (its heartbeat works).
	Renewed() (sent time.Time, current bool)
	// AliveUntil is until when the session named ref is alive by this
	// process's observation (zero: not alive, or never seen); known is
	// false while the process cannot tell.
	AliveUntil(ref string) (until time.Time, known bool)
	// EchoedSince reports whether a heartbeat of this process's own
	// session sent after the judgement has come back through its watch;
	// if not, it has one sent and calls notify (which must not block) when
	// the next comes back: once per echo for all calls of one member, the
	// notify of the first call since the last echo (a member asks at every
	// look, always with its election's wake-up). judgement names one
	// judgement of the caller,
	// a new number for each: a heartbeat counts when it was sent after
	// the first call for that number, whatever the clock read.
	EchoedSince(judgement uint64, notify func()) bool
}

// Lock is the elector's lock with its session mark.
type Lock interface {
	resourcelock.Interface
	lockcap.SessionLock
}

// Config configures session mode for one candidate.
type Config struct {
	// Name labels logs; the elector's Config.Name.
	Name string
	// Heartbeat is the process's session.
	Heartbeat Heartbeat
	// Lock carries the session mark next to the record.
	Lock Lock
	// RetryPeriod is the elector's.
	RetryPeriod time.Duration
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
}

// Member is one candidate's session mode. Its methods are called by one
// election loop only; Mixed may be called from any goroutine.
type Member struct {
	cfg Config
	me  string
	log *zap.Logger
	// over is this candidate's latest judgement that the observed
	// holder's session is over (numbered, for Heartbeat.EchoedSince), with
	// the session and its expiry as then observed.
	over struct {
		ref   string
		until time.Time
		id    uint64
	}
	// mixed is set once a holder was seen that does not understand
	// sessions: it may still be a candidate, and it would take a record
	// that is not rewritten.
	mixed atomic.Bool
}

// New returns session mode for cfg.
func New(cfg Config) *Member {
	log := electionlog.For(cfg.Logger, cfg.Name, cfg.Lock)
	return &Member{cfg: cfg, me: cfg.Lock.Identity(), log: log}
}

// Ref is this process's session, as records name it.
func (m *Member) Ref() string { return m.cfg.Heartbeat.Ref() }

// Renewed is the heartbeat of this process's session (see Heartbeat).
func (m *Member) Renewed() (sent time.Time, current bool) { return m.cfg.Heartbeat.Renewed() }

// Mixed reports whether a holder without sessions was seen: this candidate
// renews its record itself.
func (m *Member) Mixed() bool { return m.mixed.Load() }

// Mark sets the session mark that goes with a write of a record: this
// candidate's current session when the record names it (mine) and the
// session works, otherwise a mark without a session.
// Every record this candidate writes naming itself names its session as
// the writing process's, so that a restart knows the record for an
// earlier process's (EarlierProcess).
func (m *Member) Mark(mine bool) {
	mark := lockmeta.SessionMark{Mixed: m.mixed.Load(), Process: m.cfg.Heartbeat.Ref()}
	if !mark.Mixed && mine {
		if _, current := m.cfg.Heartbeat.Renewed(); current {
			mark.Session = mark.Process
		}
	}
	m.cfg.Lock.SetSession(mark)
}

// Detach marks the next write as naming no session (the holder leaves its
// lock to expire by its own lease).
func (m *Member) Detach() {
	m.cfg.Lock.SetSession(lockmeta.SessionMark{Mixed: m.mixed.Load(), Process: m.cfg.Heartbeat.Ref()})
}

// HolderRef is the session the lock object last seen names for holder; ""
// when its mark names none or belongs to another holder.
func (m *Member) HolderRef(holder string) string {
	mark, ok := m.cfg.Lock.SessionMark()
	if !ok || mark.Holder != holder {
		return ""
	}
	return mark.Session
}

// EarlierProcess reports whether the record naming this identity was
// written by an earlier process of it: its mark names, as the session that
// keeps the holder alive or as the writing process's, a session other than
// this process's (the token changes with every start). A record another
// holder wrote naming this identity (a handover) names neither.
func (m *Member) EarlierProcess() bool {
	mark, ok := m.cfg.Lock.SessionMark()
	if !ok || mark.Holder != m.me {
		return false
	}
	mine := m.cfg.Heartbeat.Ref()
	return (mark.Session != "" && mark.Session != mine) || (mark.Process != "" && mark.Process != mine)
}

// NoteHolder marks the election mixed when holder, another candidate that
// the observed record names, does not understand sessions.
func (m *Member) NoteHolder(holder string) {
	if m.mixed.Load() || holder == "" || holder == m.me {
		return
	}
	if mark, ok := m.cfg.Lock.SessionMark(); ok && mark.Holder == holder && !mark.Mixed {
		return
	}
	m.mixed.Store(true)
	m.log.Info("a holder that does not use sessions leads this election; this candidate renews its record itself when it leads",
		zap.String("holder", holder))
}

// HolderUntil is until when another holder whose record names session ref
// is alive by that session, judged at now; recordEnd is when its record's
// own lease runs out. A session this process's watch shows over counts as
// over only once this process's own heartbeat, sent after that was first
// judged, has echoed back; until then, and while the process cannot tell,
// the holder counts as alive for one more RetryPeriod, and wake is called
// at the echo.
func (m *Member) HolderUntil(now, recordEnd time.Time, ref string, wake func()) time.Time {
	until, known := m.cfg.Heartbeat.AliveUntil(ref)
	switch {
	case !known:
		return now.Add(m.cfg.RetryPeriod)
	case until.After(now) || recordEnd.After(now):
		return until // alive, or the record's own lease decides for now
	}
	if m.over.ref != ref || !m.over.until.Equal(until) || m.over.id == 0 {
		m.over.ref, m.over.until, m.over.id = ref, until, m.over.id+1
	}
	if !m.cfg.Heartbeat.EchoedSince(m.over.id, wake) {
		return now.Add(m.cfg.RetryPeriod)
	}
	return until
}
