package sim

import (
	"encoding/json"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Kinds of writes of the handover and session protocols that a targeted
// fault can fail (World.FailWrites). The kind of a write is read from what
// it sends against what the API stores, as a proxy in front of the API
// server could tell them apart.
const (
	// WriteRequest: a candidate asks the holder for the lock (the handover
	// annotation names it, unanswered, over a record naming another).
	WriteRequest = "request"
	// WriteAnswer: the holder answers a request (accepted or refused).
	WriteAnswer = "answer"
	// WriteSuccessor: the holder writes the record naming someone else
	// (the candidate it accepted, or a successor at its release).
	WriteSuccessor = "successor"
	// WriteHeartbeat: a session's heartbeat renews its session Lease.
	WriteHeartbeat = "heartbeat"
	// WriteMark: a holder writes a record whose session mark names a
	// session other than the one the stored object names.
	WriteMark = "mark"
)

// WriteKinds are the kinds of writes a targeted fault can fail.
var WriteKinds = []string{WriteRequest, WriteAnswer, WriteSuccessor, WriteHeartbeat, WriteMark}

// writeFault fails the next n writes of one kind: with a 500, unexecuted,
// or (lost) executed with the answer lost to a timeout.
type writeFault struct {
	n    int
	lost bool
}

// lockView is what a write of the lock object says, for telling its kind.
type lockView struct {
	holder   string
	handover lockmeta.Handover
	mark     lockmeta.SessionMark
}

func viewLock(obj runtime.Object) lockView {
	var (
		v   lockView
		ann map[string]string
	)
	switch o := obj.(type) {
	case *coordinationv1.Lease:
		if o == nil {
			return v
		}
		ann = o.Annotations
		v.holder = resourcelock.LeaseToRecord(o).HolderIdentity
	case *corev1.ConfigMap:
		if o == nil {
			return v
		}
		ann = o.Annotations
		if raw, ok := ann[resourcelock.LeaderAnnotationKey]; ok {
			if rec, err := resourcelock.DecodeRecord([]byte(raw)); err == nil {
				v.holder = rec.HolderIdentity
			}
		}
	default:
		return v
	}
	if raw, ok := ann[lockmeta.HandoverAnnotationKey]; ok {
		v.handover = decodeHandover(raw)
	}
	if raw, ok := ann[lockmeta.SessionAnnotationKey]; ok {
		_ = json.Unmarshal([]byte(raw), &v.mark) // a bad mark reads as none
	}
	return v
}

// writeKind tells which protocol write of actor in is (one of WriteKinds),
// or "" for any other write.
func (a *apiServer) writeKind(actor, resource, name string, in runtime.Object) string {
	if isSessionLease(resource, name) {
		if l, ok := in.(*coordinationv1.Lease); ok && l != nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			return WriteHeartbeat
		}
		return ""
	}
	if resource != configMaps && resource != leases {
		return ""
	}
	next := viewLock(in)
	var cur lockView
	if obj := a.getLock(resource, name); obj != nil {
		cur = viewLock(obj)
	}
	h, was := next.handover, cur.handover
	switch {
	case cur.holder == actor && next.holder != "" && next.holder != actor:
		return WriteSuccessor
	case h.Candidate == actor && h.Answer == "" && next.holder != actor &&
		(was.Candidate != h.Candidate || was.Answer != "" || !sameTime(was.RequestTime, h.RequestTime)):
		return WriteRequest
	case h.Holder == actor && h.Candidate != "" && h.Answer != "" && (was.Answer != h.Answer || was.Candidate != h.Candidate):
		return WriteAnswer
	case next.holder == actor && next.mark.Holder == actor && next.mark.Session != "" &&
		(cur.mark.Holder != actor || cur.mark.Session != next.mark.Session):
		return WriteMark
	}
	return ""
}

// takeWriteFault reports whether a write of kind is to fail, and whether
// it is executed with its answer lost; it counts the fault as hit.
func (s *actorState) takeWriteFault(kind string) (fail, lost bool) {
	if kind == "" {
		return false, false
	}
	s.mu.Lock()
	f, ok := s.writeFaults[kind]
	if !ok || f.n <= 0 {
		s.mu.Unlock()
		return false, false
	}
	f.n--
	if f.n == 0 {
		delete(s.writeFaults, kind)
	} else {
		s.writeFaults[kind] = f
	}
	if s.writeHits == nil {
		s.writeHits = map[string]int{}
	}
	s.writeHits[kind]++
	s.lastInjected = s.clock.Now()
	hit := s.onWriteFault
	s.mu.Unlock()
	if s.injected != nil {
		s.injected()
	}
	if hit != nil {
		hit(kind, f.lost)
	}
	return true, f.lost
}

// addWriteFaults makes the next n writes of kind fail (see writeFault).
func (s *actorState) addWriteFaults(kind string, n int, lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writeFaults == nil {
		s.writeFaults = map[string]writeFault{}
	}
	f := s.writeFaults[kind]
	f.n += n
	f.lost = f.lost || lost
	s.writeFaults[kind] = f
}

// writeFaultsArmed reports whether a targeted write fault waits for a
// write of the actor.
func (s *actorState) writeFaultsArmed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.writeFaults) > 0
}

// writeFaultHits is how many writes of kind a targeted fault failed.
func (s *actorState) writeFaultHits(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeHits[kind]
}

// sameTime reports whether two optional times are both absent or equal.
func sameTime(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}

// FailWrites makes the next n writes of kind by the actor named name fail
// with a 500, unexecuted, or, with lost, executed with the answer lost to
// a timeout. The fault counts when it hits (see World.noteFault). An
// unknown kind is a mistake of the schedule, reported as a violation.
func (w *World) FailWrites(name, kind string, n int, lost bool) {
	for _, k := range WriteKinds {
		if k == kind {
			w.state(name).addWriteFaults(kind, n, lost)
			return
		}
	}
	w.j.violate("setup", "unknown write kind %q; want one of %s", kind, strings.Join(WriteKinds, ", "))
}
