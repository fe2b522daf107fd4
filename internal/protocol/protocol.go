// Package protocol names the points at which the elector core (package
// pkg/election/elector) calls the protocols plugged into it: cooperative
// handover, coordination, sessions, the proof that a holder's process
// exited, and the pacing of first attempts. Each is implemented in a
// package of its own (internal/protocol/handover, coordination, sessions;
// internal/election/podexit; internal/pacing), as are the priority rule
// with its steal damper and the release yield (internal/protocol/preemption,
// damping, yield). The handover, coordination and sessions packages each
// give the core a Role, and pacing a First: the interface below, possibly
// nil, wrapped in a null object, so that the core calls it without asking
// whether the protocol is on. None holds a reference to the core: the core
// passes in what a decision needs (the record, the clock reading) and acts
// on the answer itself. The core calls every method from its election loop
// only, unless a method says otherwise.
package protocol

import (
	"context"
	"time"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Handover is cooperative preemption as the core sees it (package internal/protocol/handover
// implements it; see the elector's Config.Handover). The core
// calls it from the election loop only, with the clock reading of the
// decision in progress, after it has read or been delivered the lock object
// whose handover annotation the protocol reads. The protocol writes only
// that annotation; the record, the fence and the end of a term stay the
// core's.
type Handover interface {
	// Grace is how long a candidate waits for an answer before it takes
	// the lock by force; validation requires more than RetryPeriod.
	Grace() time.Duration
	// Ask is called when this candidate may take rec from its holder now
	// by the comparison and the damper: force is true when the holder
	// cannot or did not answer in time, false when the candidate asked or
	// waits for (or was given) an answer.
	Ask(ctx context.Context, rec *resourcelock.Record, now time.Time) (force bool, err error)
	// AskedAt is when this candidate last asked the current holder's term;
	// zero when it has not.
	AskedAt() time.Time
	// WakeAt is when the candidate's handover state changes by itself;
	// zero when nothing is waited for.
	WakeAt(now time.Time) time.Time
	// Triggered tells the protocol that Trigger was called: a refused
	// request may be repeated at once.
	Triggered()
	// Retract takes this candidate's request back, if the object last
	// read carries it; retry reports a conflict (read again, and retry).
	Retract(ctx context.Context) (retry bool)
	// Answer answers the request addressed to this leading holder, if
	// any, and returns it when accepted with a promise to stop within
	// stopWithin; fenceLeft, when positive, is how long the holder's work
	// must still wait (its fence), which an accepted request that honours
	// fences carries (lockmeta.Handover.FenceMillis).
	Answer(ctx context.Context, now time.Time, stopWithin, fenceLeft time.Duration) (*lockmeta.Handover, error)
	// Reconsiders reports whether a fresh request to this holder must be
	// answered again (refused but now entitled, or accepted in a term
	// whose end could not name the candidate).
	Reconsiders(now time.Time) bool
	// Successor is the fresh request to this holder from a candidate
	// entitled now, the one a holder ending its term hands the lock to;
	// nil when there is none.
	Successor(now time.Time) *lockmeta.Handover
	// Wrote tells the protocol that a write of the lock object by this
	// candidate, sent at now, succeeded: a request that the written object
	// did not carry and a later one does was written after now, which
	// bounds its age by this candidate's own clock.
	Wrote(now time.Time)
}

// Coordination is a candidate's side of a coordinated election as the core
// sees it (see the elector's Config.Coordination; package
// internal/protocol/coordination implements it): a coordinator writes the holder into the lock, or names a
// better candidate as the preferred holder; candidates follow. The core
// calls it from the election loop only; it reads the preferred holder from
// the lock itself.
type Coordination interface {
	// Problems lists what is wrong with the protocol's own settings.
	Problems() []string
	// Patience is how long a vacant lock is left to the coordinator.
	Patience() time.Duration
	// LeaveVacant reports whether a lock found vacant at now is left to
	// the coordinator still.
	LeaveVacant(now time.Time) bool
	// Occupied notes that the observed record names a holder.
	Occupied()
	// Acquired notes that this candidate took the lock; unassigned: it
	// took a vacant lock that no coordinator assigned.
	Acquired() (unassigned bool)
	// WakeAt is when a vacant lock may be taken; zero when none waits.
	WakeAt() time.Time
	// Live reports whether a candidate named as preferred holder is live.
	Live(identity string) bool
	// Successor is the best live candidate to hand the lock to at the end
	// of a graceful term; ok is false when none is known (release).
	Successor() (identity, key string, ok bool)
}

// Sessions is session mode as the core sees it (see the elector's
// Config.Session; package internal/protocol/sessions implements it on the
// process's session): a holder whose lock names its session does not
// rewrite its record every RetryPeriod; the session's heartbeat keeps it
// alive, and followers judge it alive while the session is, by their own
// observation. See "Sessions" in the elector's package doc. The core calls
// it from the election loop only, except Mixed.
type Sessions interface {
	// Ref names this process's session in records; "" while it has none.
	Ref() string
	// Renewed is when this process's latest heartbeat was sent (one the
	// watch delivered back), and whether the session is current.
	Renewed() (sent time.Time, current bool)
	// Mixed reports whether a holder without sessions was seen, so that
	// this candidate renews its record itself.
	Mixed() bool
	// Mark sets the session mark of the next write; mine: the record
	// written names this candidate.
	Mark(mine bool)
	// Detach sets a mark that names no session for the next write.
	Detach()
	// HolderRef is the session the lock object last seen names for holder.
	HolderRef(holder string) string
	// EarlierProcess reports whether the lock's mark names another session
	// of this identity (a record written before a restart).
	EarlierProcess() bool
	// NoteHolder is told of every other holder observed.
	NoteHolder(holder string)
	// HolderUntil is until when another holder whose record names session
	// ref is alive by it; recordEnd is when its record's lease runs out;
	// wake is called when a judgement may change.
	HolderUntil(now, recordEnd time.Time, ref string, wake func()) time.Time
}

// HolderExit is the hook through which a follower learns, before the lease
// runs out, that the observed holder's process has exited (package
// election/podexit implements it from the kubelet's reports of the
// holder's Pod). The elector asks it whenever it judges whether the lease
// of a record naming another holder still binds it; a true answer ends
// that lease at once, and the follower takes the lock through the usual
// write over the version it observed, which fails when the holder wrote
// meanwhile.
//
// A lease ended this way is not a steal: no fence is set for the exited
// holder, whose work cannot run. A fence set earlier for another holder
// (one this candidate took the lock from by force) stays as it is.
type HolderExit interface {
	// Exited reports whether the process that holds rec, the record of
	// the lock's object version last seen, has exited for certain. It is
	// called from the election loop, must not block, and must answer false
	// whenever it is in doubt: a wrong true lets a successor start beside
	// a holder that still works.
	Exited(rec resourcelock.Record) bool
}

// Pacer paces the first attempts of the electors it is given to (see the
// elector's Config.Pacer; package internal/pacing implements it): a
// program starting thousands of elections at once sends their first
// requests at a bounded rate, and a bounded number of them wait for the
// API server at once. Only attempts that may send a request wait: a follower whose watch shows a
// live holder decides from the watch's cache, and one that learns of such
// a holder while it waits gives its turn back. It must be safe for
// concurrent use.
type Pacer interface {
	// Built reports whether the pacer was built by its constructor
	// (pacing.NewPacer); a zero value is refused by validation.
	Built() bool
	// Turn waits for the turn of the elector called name (its identity and
	// lock), in an order the pacer derives from name, and gives up when
	// ctx ends or giveUp, asked at the start and at each of wakeups,
	// reports true. release gives the turn back after the attempt; it is
	// called exactly once.
	Turn(ctx context.Context, name string, wakeups <-chan struct{}, giveUp func() bool) (release func())
}
