// Package emptied is the rule for a lock object found emptied: missing, or
// holding no record, most often because it was deleted or re-created (by
// kubectl replace --force or a GitOps tool) while a holder works. That is
// not a release: the holder is not told, goes on working and writes its
// record again at its next renew, and it may have renewed after the last
// record a candidate saw, unseen (a polling candidate, failed reads, a
// watch that broke).
//
// Guarantees: once a candidate has seen the object emptied, the object
// counts as held until one lease has passed since the first time it was
// seen so, whatever record was seen before; only a record seen again, or
// the candidate's own write, starts the count afresh. An emptied object
// that is another object than the one seen emptied before (created since:
// a new uid, or an object where there was none) starts the count afresh
// too: a holder may have written its record into the object in between
// and be working, and the count of the earlier object says nothing of it.
// A missing object seen by a candidate that never saw a record (the first
// election of a cluster) is the one exception, free at once.
//
// What it assumes of the caller: it is called from the election loop only,
// with the clock reading of the decision in progress; it is told of every
// read or delivery of the lock object before the record is observed (Note)
// and of every write of the caller's own record (Clear). It holds no
// reference to the elector or the lock.
package emptied

import "time"

// Since is when a candidate first saw the lock object emptied. The zero
// value has not seen it so: the object held a record when last seen, or
// was never looked at.
type Since struct {
	at      time.Time // zero while the object holds a record
	missing bool      // the object was missing at the last look
	uid     string    // the object's uid at the last look; empty when unknown
}

// Note follows a read or delivery at now: hasRecord tells whether the
// object exists and holds a record, missing whether it does not exist,
// and uid is the object's uid (empty when missing or unknown). An emptied
// object keeps the time it was first seen so, unless it was created since
// the last look (another uid than that look's, or found where that look
// found none); a record clears it. The same object looked at again, with
// no version between, is no new object.
func (s *Since) Note(hasRecord, missing bool, uid string, now time.Time) {
	replaced := !missing && uid != "" && s.uid != "" && uid != s.uid
	switch {
	case hasRecord:
		s.at = time.Time{}
	case s.at.IsZero() || !missing && (replaced || s.missing):
		s.at = now
	}
	s.missing, s.uid = missing, uid
	if missing {
		s.uid = ""
	}
}

// Clear forgets an emptied object: the caller wrote its record into it.
func (s *Since) Clear() { s.at = time.Time{} }

// Seen reports whether the object was seen emptied and no record has been
// seen in it since. A record that follows is no handover from the holder
// seen before: that holder may not have seen the object emptied.
func (s Since) Seen() bool { return !s.at.IsZero() }

// Held reports whether an emptied object, read at now, still counts as
// held: until lease has passed since it was first seen so (now, if not
// seen so before). firstElection tells that the object is missing and the
// candidate never saw a record; then it is free at once and nothing is
// noted. fresh reports that now is when the object was first seen
// emptied.
func (s *Since) Held(now time.Time, lease time.Duration, firstElection bool) (held, fresh bool) {
	if firstElection {
		return false, false
	}
	if s.at.IsZero() {
		s.at = now
	}
	return !now.After(s.at.Add(lease)), now.Equal(s.at)
}

// WakeAt is when an emptied object stops counting as held, lease after it
// was first seen so; zero when it was not seen emptied or that time is not
// after now.
func (s Since) WakeAt(now time.Time, lease time.Duration) time.Time {
	if at := s.at.Add(lease); !s.at.IsZero() && at.After(now) {
		return at
	}
	return time.Time{}
}
