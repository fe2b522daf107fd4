package sim

import (
	"encoding/json"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// The wall clock of an actor.
//
// Every actor runs on the world's clock, which stands for the monotonic
// clock of its process: the durations it measures (leases by observation,
// retry periods, deadlines) are the world's. What its process writes into
// objects, and compares with what others wrote, is its wall clock, which
// may be off the world's clock by an offset that the world can step. The
// actor's client carries the offset across: it adds it to every timestamp
// the actor writes and subtracts it from every timestamp it reads (see
// shiftTimes for the fields), so that the actor sees its own clock and the
// API stores (and others see) its wall clock.
//
// A version of an object is shifted, for one actor, by the offset that
// actor had when it first met that version (its own write, a read, a list
// or a watch event), and by that offset every time after: a process
// compares timestamps it read with timestamps it read or wrote before
// (is this renewal new, is this the echo of my heartbeat), and those wall
// values do not change when its clock steps later.

// versionKey names one version of one object.
type versionKey struct {
	resource, name string
	rv             int64
}

// versionOf returns the key of obj's version; false for an object without
// metadata.
func versionOf(resource string, obj runtime.Object) (versionKey, bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return versionKey{}, false
	}
	return versionKey{resource: resource, name: m.GetName(), rv: objectRV(obj)}, true
}

// wallOffset is how far the actor's wall clock is ahead of the world's.
func (s *actorState) wallOffset() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wall
}

// stepWall moves the actor's wall clock by d (backwards when negative) and
// returns the new offset.
func (s *actorState) stepWall(d time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wall += d
	return s.wall
}

// wrote notes that the actor wrote version k of an object with its
// current offset: it reads that version back by the same offset, even if
// the reply was lost and the version first reaches it by a watch after a
// step.
func (s *actorState) wrote(k versionKey, offset time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.versions == nil {
		s.versions = map[versionKey]time.Duration{}
	}
	if _, ok := s.versions[k]; !ok {
		s.versions[k] = offset
	}
}

// incoming returns obj as the actor sees it: its timestamps shifted back
// by the offset the actor had when it first met this version.
func (s *actorState) incoming(resource string, obj runtime.Object) runtime.Object {
	k, ok := versionOf(resource, obj)
	if !ok {
		return obj
	}
	s.mu.Lock()
	off, seen := s.versions[k]
	if !seen {
		off = s.wall
		if s.versions == nil {
			s.versions = map[versionKey]time.Duration{}
		}
		s.versions[k] = off
	}
	s.mu.Unlock()
	return shiftTimes(obj, -off)
}

// incomingList shifts every item of a list as incoming does.
func (s *actorState) incomingList(resource string, list runtime.Object) (runtime.Object, error) {
	out := list.DeepCopyObject()
	items, err := meta.ExtractList(out)
	if err != nil {
		return nil, fmt.Errorf("sim: shift the times of a list of %s: %w", resource, err)
	}
	for i, it := range items {
		items[i] = s.incoming(resource, it)
	}
	if err := meta.SetList(out, items); err != nil {
		return nil, fmt.Errorf("sim: shift the times of a list of %s: %w", resource, err)
	}
	return out, nil
}

// shiftTimes returns obj with every timestamp a process writes moved by d:
// for a Lease (the lock or a session Lease) its acquire and renew times,
// for a ConfigMap the acquire and renew times of the record in its leader
// annotation, and for both the request and answer times of the handover
// annotation. A shift of zero returns obj itself; any other shift a copy.
// Times the API server sets (creationTimestamp) are the server's and stay;
// an annotation that does not decode is left as it is, for the readers to
// reject.
func shiftTimes(obj runtime.Object, d time.Duration) runtime.Object {
	if d == 0 {
		return obj
	}
	switch o := obj.(type) {
	case *coordinationv1.Lease:
		if o == nil {
			return obj
		}
		o = o.DeepCopy()
		for _, t := range []*metav1.MicroTime{o.Spec.AcquireTime, o.Spec.RenewTime} {
			if t != nil && !t.IsZero() {
				t.Time = t.Add(d)
			}
		}
		shiftHandover(o.Annotations, d)
		return o
	case *corev1.ConfigMap:
		if o == nil {
			return obj
		}
		o = o.DeepCopy()
		if raw, ok := o.Annotations[resourcelock.LeaderAnnotationKey]; ok {
			if rec, err := resourcelock.DecodeRecord([]byte(raw)); err == nil {
				for _, t := range []*metav1.Time{&rec.AcquireTime, &rec.RenewTime} {
					if !t.IsZero() {
						t.Time = t.Add(d)
					}
				}
				o.Annotations[resourcelock.LeaderAnnotationKey] = string(resourcelock.EncodeRecord(*rec))
			}
		}
		shiftHandover(o.Annotations, d)
		return o
	}
	return obj
}

// shiftHandover moves the times of the handover annotation in ann by d.
func shiftHandover(ann map[string]string, d time.Duration) {
	raw, ok := ann[lockmeta.HandoverAnnotationKey]
	if !ok {
		return
	}
	var h lockmeta.Handover
	if err := json.Unmarshal([]byte(raw), &h); err != nil {
		return
	}
	if h.RequestTime == nil && h.AnswerTime == nil {
		return
	}
	for _, t := range []*metav1.Time{h.RequestTime, h.AnswerTime} {
		if t != nil && !t.IsZero() {
			t.Time = t.Add(d)
		}
	}
	out, err := json.Marshal(h)
	if err != nil {
		return
	}
	ann[lockmeta.HandoverAnnotationKey] = string(out)
}
