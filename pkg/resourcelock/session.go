package resourcelock

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

// SetSession implements lockcap.SessionLock.
func (l *objectLock[T, L]) SetSession(mark lockmeta.SessionMark) {
	l.session, l.sessionOn = mark, true
}

// SessionMark implements lockcap.SessionLock.
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
	m := lockmeta.SessionMark{Holder: r.HolderIdentity, Mixed: l.session.Mixed}
	if r.HolderIdentity == l.cfg.Identity {
		m.Session, m.Process = l.session.Session, l.session.Process
	}
	raw, _ := json.Marshal(m) // two strings: cannot fail
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[lockmeta.SessionAnnotationKey] = string(raw)
}
