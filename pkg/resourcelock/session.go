package resourcelock

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

// SessionLock is a lock whose record writes can name the holder's session.
// LeaseLock and ConfigMapLock implement it.
type SessionLock interface {
	// SetSession turns session marks on: from now on every write of a
	// record naming this lock's identity carries a mark naming ref (which
	// may be empty: the holder renews its record itself), a record naming
	// another holder carries a mark without a session, and a release
	// removes the mark. mixed is written into the mark (see
	// lockmeta.SessionMark.Mixed). A lock whose SetSession was never called leaves
	// the annotation as it finds it.
	SetSession(ref string, mixed bool)
	// SessionMark returns the mark of the object version last seen; false
	// when there is none or it cannot be decoded.
	SessionMark() (lockmeta.SessionMark, bool)
}

var (
	_ SessionLock = (*LeaseLock)(nil)
	_ SessionLock = (*ConfigMapLock)(nil)
)

// SetSession implements SessionLock.
func (l *objectLock[T, L]) SetSession(ref string, mixed bool) {
	l.session, l.sessionMixed, l.sessionOn = ref, mixed, true
}

// SessionMark implements SessionLock.
func (l *objectLock[T, L]) SessionMark() (lockmeta.SessionMark, bool) {
	if !l.valid {
		return lockmeta.SessionMark{}, false
	}
	return lockmeta.ReadSessionMark(l.obj.GetAnnotations())
}

// markSession writes the mark that goes with record r, when marks are on.
func (l *objectLock[T, L]) markSession(meta *metav1.ObjectMeta, r Record) {
	if !l.sessionOn {
		return
	}
	if r.HolderIdentity == "" {
		delete(meta.Annotations, lockmeta.SessionAnnotationKey)
		return
	}
	m := lockmeta.SessionMark{Holder: r.HolderIdentity, Mixed: l.sessionMixed}
	if r.HolderIdentity == l.cfg.Identity {
		m.Session = l.session
	}
	raw, _ := json.Marshal(m) // two strings: cannot fail
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[lockmeta.SessionAnnotationKey] = string(raw)
}
