package resourcelock

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SessionAnnotationKey is the annotation of a lock object in which a holder
// that renews through a session (one heartbeat Lease per process, see
// package election/session) names that session. Its value is the JSON of a
// SessionMark. Readers that do not know it (istiod, older meshd) ignore it
// and read the record as usual.
const SessionAnnotationKey = "meshd.io/session"

// SessionMark is what a session-aware writer leaves on a lock object next
// to the record.
type SessionMark struct {
	// Holder is the holder identity of the record the mark was written
	// with. A mark whose Holder is not the record's holder was left by an
	// earlier writer (istiod keeps annotations it does not know) and means
	// nothing.
	Holder string `json:"holder"`
	// Session names the session whose heartbeat keeps the holder alive, as
	// "<lease name>/<token>"; empty when the holder renews its record
	// itself, although it understands sessions.
	Session string `json:"session,omitempty"`
}

// SessionLock is a lock whose record writes can name the holder's session.
// LeaseLock and ConfigMapLock implement it.
type SessionLock interface {
	// SetSession turns session marks on: from now on every write of a
	// record naming this lock's identity carries a mark naming ref (which
	// may be empty: the holder renews its record itself), a record naming
	// another holder carries a mark without a session, and a release
	// removes the mark. A lock whose SetSession was never called leaves the
	// annotation as it finds it.
	SetSession(ref string)
	// SessionMark returns the mark of the object version last seen; false
	// when there is none or it cannot be decoded.
	SessionMark() (SessionMark, bool)
}

var (
	_ SessionLock = (*LeaseLock)(nil)
	_ SessionLock = (*ConfigMapLock)(nil)
)

// SetSession implements SessionLock.
func (l *objectLock[T, L]) SetSession(ref string) { l.session, l.sessionOn = ref, true }

// SessionMark implements SessionLock.
func (l *objectLock[T, L]) SessionMark() (SessionMark, bool) {
	if !l.valid {
		return SessionMark{}, false
	}
	return readSessionMark(l.obj.GetAnnotations())
}

func readSessionMark(annotations map[string]string) (SessionMark, bool) {
	raw, ok := annotations[SessionAnnotationKey]
	if !ok {
		return SessionMark{}, false
	}
	var m SessionMark
	if err := json.Unmarshal([]byte(raw), &m); err != nil || m.Holder == "" {
		return SessionMark{}, false
	}
	return m, true
}

// markSession writes the mark that goes with record r, when marks are on.
func (l *objectLock[T, L]) markSession(meta *metav1.ObjectMeta, r Record) {
	if !l.sessionOn {
		return
	}
	if r.HolderIdentity == "" {
		delete(meta.Annotations, SessionAnnotationKey)
		return
	}
	m := SessionMark{Holder: r.HolderIdentity}
	if r.HolderIdentity == l.cfg.Identity {
		m.Session = l.session
	}
	raw, _ := json.Marshal(m) // two strings: cannot fail
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[SessionAnnotationKey] = string(raw)
}
