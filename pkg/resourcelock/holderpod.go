package resourcelock

import (
	"encoding/json"
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HolderPodAnnotationKey is the annotation of a lock object in which a
// holder that runs in a Pod says which Pod, container and run of that
// container it is (package election/podexit). Its value is the JSON of a
// HolderPod. Readers that do not know it (istiod, client-go, older meshd)
// ignore it; writers that do not know it keep it, which is why the mark
// names the holder it was written for.
const HolderPodAnnotationKey = "leader.meshd.io/holder-pod"

// HolderPod is what a holder running in a Pod publishes next to its
// record, so that followers can watch that Pod for proof that the holder's
// process has exited (docs/handover.md, "Pod-aware failover").
type HolderPod struct {
	// Holder is the holder identity of the record the mark was written
	// with. A mark whose Holder is not the record's holder was left by an
	// earlier writer and means nothing.
	Holder string `json:"holder"`
	// Namespace, Pod and UID name the Pod object the holder runs in; a Pod
	// of the same name with another UID is another Pod.
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	UID       string `json:"uid"`
	// Container is the name of the holder's container in that Pod.
	Container string `json:"container"`
	// RestartCount and StartedAt are the kubelet's restartCount and
	// state.running.startedAt of the container's run the holder's process
	// belongs to, as the holder read them from its own Pod's status after
	// it checked that they describe its own run.
	RestartCount int32       `json:"restartCount"`
	StartedAt    metav1.Time `json:"startedAt"`
	// ProcessStart is a moment at which the holder's process was alive, on
	// its own clock, which is the clock of its node and so of the kubelet
	// that reports its container's end. Microsecond precision.
	ProcessStart metav1.MicroTime `json:"processStart"`
}

// Complete reports whether every field a follower relies on is set.
func (p HolderPod) Complete() bool {
	return p.Holder != "" && p.Namespace != "" && p.Pod != "" && p.UID != "" && p.Container != "" &&
		p.RestartCount >= 0 && !p.StartedAt.IsZero() && !p.ProcessStart.IsZero()
}

// HolderPodSource supplies the mark a holder writes with its record; false
// while it has none to publish (the holder's own Pod status has not yet
// shown its run). It is called on every write and must not block.
type HolderPodSource func() (HolderPod, bool)

// HolderPodReader is a lock that reads the HolderPod mark of the object
// version it saw last. LeaseLock, ConfigMapLock and MultiLock (its
// Primary's) implement it.
type HolderPodReader interface {
	// HolderPod returns the mark of the object version last seen; false
	// when there is none, it cannot be decoded or it is incomplete.
	HolderPod() (HolderPod, bool)
}

var (
	_ HolderPodReader = (*LeaseLock)(nil)
	_ HolderPodReader = (*ConfigMapLock)(nil)
	_ HolderPodReader = (*MultiLock)(nil)
)

// HolderPod implements HolderPodReader.
func (l *objectLock[T, L]) HolderPod() (HolderPod, bool) {
	if !l.valid {
		return HolderPod{}, false
	}
	return readHolderPod(l.obj.GetAnnotations())
}

// HolderPod implements HolderPodReader with Primary's mark.
func (m *MultiLock) HolderPod() (HolderPod, bool) {
	if r, ok := m.Primary.(HolderPodReader); ok {
		return r.HolderPod()
	}
	return HolderPod{}, false
}

func readHolderPod(annotations map[string]string) (HolderPod, bool) {
	raw, ok := annotations[HolderPodAnnotationKey]
	if !ok {
		return HolderPod{}, false
	}
	var p HolderPod
	if err := json.Unmarshal([]byte(raw), &p); err != nil || !p.Complete() {
		return HolderPod{}, false
	}
	return p, true
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
	return meta.Annotations[HolderPodAnnotationKey] != have[HolderPodAnnotationKey]
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
		p  HolderPod
		ok bool
	)
	if r.HolderIdentity != "" && r.HolderIdentity == l.cfg.Identity {
		p, ok = l.cfg.HolderPod()
		p.Holder = r.HolderIdentity
	}
	if !ok || !p.Complete() {
		delete(meta.Annotations, HolderPodAnnotationKey)
		return
	}
	// Times in UTC, so that the annotation reads the same on every node.
	p.StartedAt = metav1.NewTime(p.StartedAt.UTC().Truncate(time.Second))
	p.ProcessStart = metav1.NewMicroTime(p.ProcessStart.UTC())
	raw, err := json.Marshal(p)
	if err != nil {
		delete(meta.Annotations, HolderPodAnnotationKey)
		return
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[HolderPodAnnotationKey] = string(raw)
}
