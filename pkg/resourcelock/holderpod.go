package resourcelock

import (
	"encoding/json"
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

// HolderPod implements lockcap.HolderPodReader.
func (l *objectLock[T, L]) HolderPod() (lockmeta.HolderPod, bool) {
	if !l.valid {
		return lockmeta.HolderPod{}, false
	}
	return lockmeta.ReadHolderPod(l.obj.GetAnnotations())
}

// HolderPod implements lockcap.HolderPodReader with Primary's mark.
func (m *multiLock) HolderPod() (lockmeta.HolderPod, bool) {
	if r, ok := m.Primary.(holderPodReader); ok {
		return r.HolderPod()
	}
	return lockmeta.HolderPod{}, false
}

// HolderPodPending reports whether the object version last seen holds a
// record of this lock's identity whose Pod mark is not the one its next
// write would carry: the holder's source has found its run (or withdrawn
// it) since the record was written. A holder that leaves its renewals to
// a session writes its record anyway while this holds, so that followers
// see its Pod without waiting for a write that may never come.
func (l *objectLock[T, L]) HolderPodPending() bool {
	if l.cfg.HolderPod == nil || !l.valid {
		return false
	}
	rec, _, err := l.kind.readRecord(l.obj)
	if err != nil || rec == nil || rec.HolderIdentity == "" || rec.HolderIdentity != l.cfg.Identity {
		return false
	}
	have := l.obj.GetAnnotations()
	meta := metav1.ObjectMeta{Annotations: maps.Clone(have)}
	l.markHolderPod(&meta, *rec)
	return meta.Annotations[lockmeta.HolderPodAnnotationKey] != have[lockmeta.HolderPodAnnotationKey]
}

// markHolderPod writes the mark that goes with record r when the lock has
// a source: its holder's mark when r names this lock's identity and the
// source has one, no mark otherwise (a release, a record naming another
// holder, a holder that has not yet checked its run). A lock without a
// source leaves the annotation as it finds it.
func (l *objectLock[T, L]) markHolderPod(meta *metav1.ObjectMeta, r Record) {
	if l.cfg.HolderPod == nil {
		return
	}
	var (
		p  lockmeta.HolderPod
		ok bool
	)
	if r.HolderIdentity != "" && r.HolderIdentity == l.cfg.Identity {
		p, ok = l.cfg.HolderPod()
		p.Holder = r.HolderIdentity
	}
	if !ok || !p.Complete() {
		delete(meta.Annotations, lockmeta.HolderPodAnnotationKey)
		return
	}
	// Times in UTC, so that the annotation reads the same on every node.
	p.StartedAt = metav1.NewTime(p.StartedAt.UTC().Truncate(time.Second))
	p.ProcessStart = metav1.NewMicroTime(p.ProcessStart.UTC())
	raw, err := json.Marshal(p)
	if err != nil {
		delete(meta.Annotations, lockmeta.HolderPodAnnotationKey)
		return
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[lockmeta.HolderPodAnnotationKey] = string(raw)
}
