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

// wrote notes that the actor wrote version k of an object, obj as the
// API stored it, with its current offset: it reads that version back by
// the same offset, even if the reply was lost and the version first
// reaches it by a watch after a step.
func (s *actorState) wrote(k versionKey, obj runtime.Object, offset time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.versions[k]; !ok {
		s.meet(k, obj, offset)
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
		off = s.orderKeepingOffset(k, obj)
		s.meet(k, obj, off)
	}
	s.mu.Unlock()
	return shiftTimes(obj, -off)
}

// objectKey names an object across its versions.
type objectKey struct{ resource, name string }

// metVersion is the newest version of an object an actor met: its
// resource version, the times it carries as stored (see storedTimes) and
// the offset the actor sees it by.
type metVersion struct {
	rv     int64
	times  []time.Time
	offset time.Duration
}

// meet records the offset by which the actor sees version k, obj as
// stored. s.mu is held.
func (s *actorState) meet(k versionKey, obj runtime.Object, offset time.Duration) {
	if s.versions == nil {
		s.versions = map[versionKey]time.Duration{}
		s.latest = map[objectKey]metVersion{}
	}
	s.versions[k] = offset
	ok := objectKey{k.resource, k.name}
	if prev, met := s.latest[ok]; !met || k.rv > prev.rv {
		s.latest[ok] = metVersion{rv: k.rv, times: storedTimes(obj), offset: offset}
	}
}

// orderKeepingOffset is the offset by which the actor first sees version
// k of an object, obj as stored: its current offset, unless that would
// move a time of obj to or past the same time of the newest earlier
// version the actor met, which it stores in the other order (a step
// forward as large as the time between two renewals would make a renewal
// look like the same renewal again, and a larger one like an older one).
// A real process reads stored times as they are: two that differ differ
// for it too, and in the same order, whatever its clock does, and the
// session view and the elector tell a renewal by a renew time that
// changed. Such a version is seen by the earlier version's offset; a
// comparison of its times with "now" then misses the step, as one of a
// time read before the step does (see doc.go). s.mu is held.
func (s *actorState) orderKeepingOffset(k versionKey, obj runtime.Object) time.Duration {
	prev, met := s.latest[objectKey{k.resource, k.name}]
	if !met || prev.rv >= k.rv || prev.offset == s.wall {
		return s.wall
	}
	for i, t := range storedTimes(obj) {
		if i >= len(prev.times) || t.IsZero() || prev.times[i].IsZero() || t.Equal(prev.times[i]) {
			continue
		}
		stored := t.Compare(prev.times[i])
		seen := t.Add(-s.wall).Compare(prev.times[i].Add(-prev.offset))
		if stored != seen {
			return prev.offset
		}
	}
	return s.wall
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
	case *corev1.ConfigMap:
		if o == nil {
			return obj
		}
	default:
		return obj
	}
	out := obj.DeepCopyObject()
	eachTime(out, func(t *time.Time) {
		if !t.IsZero() {
			*t = t.Add(d)
		}
	})
	return out
}

// storedTimes lists the timestamps shiftTimes moves, as obj carries them,
// in a fixed order with a zero time for each that is absent.
func storedTimes(obj runtime.Object) []time.Time {
	var out []time.Time
	eachTime(obj.DeepCopyObject(), func(t *time.Time) { out = append(out, *t) })
	return out
}

// eachTime calls f on each timestamp slot a process writes in obj (see
// shiftTimes), always the same slots for one kind of object, and keeps in
// obj what f does to them. A slot that is absent is a zero time, and
// stays absent.
func eachTime(obj runtime.Object, f func(*time.Time)) {
	slot := func(t *time.Time) {
		if t == nil {
			t = new(time.Time)
		}
		f(t)
	}
	switch o := obj.(type) {
	case *coordinationv1.Lease:
		if o == nil {
			return
		}
		for _, t := range []*metav1.MicroTime{o.Spec.AcquireTime, o.Spec.RenewTime} {
			if t == nil {
				slot(nil)
			} else {
				slot(&t.Time)
			}
		}
		eachHandoverTime(o.Annotations, slot)
	case *corev1.ConfigMap:
		if o == nil {
			return
		}
		raw, ok := o.Annotations[resourcelock.LeaderAnnotationKey]
		rec, err := resourcelock.DecodeRecord([]byte(raw))
		if !ok || err != nil {
			slot(nil)
			slot(nil)
		} else {
			slot(&rec.AcquireTime.Time)
			slot(&rec.RenewTime.Time)
			o.Annotations[resourcelock.LeaderAnnotationKey] = string(resourcelock.EncodeRecord(*rec))
		}
		eachHandoverTime(o.Annotations, slot)
	}
}

// eachHandoverTime calls slot on the request and answer times of the
// handover annotation in ann, and keeps what it does to them; on two
// absent times when there is no annotation that decodes.
func eachHandoverTime(ann map[string]string, slot func(*time.Time)) {
	var h lockmeta.Handover
	raw, ok := ann[lockmeta.HandoverAnnotationKey]
	if !ok || json.Unmarshal([]byte(raw), &h) != nil {
		slot(nil)
		slot(nil)
		return
	}
	for _, t := range []*metav1.Time{h.RequestTime, h.AnswerTime} {
		if t == nil {
			slot(nil)
		} else {
			slot(&t.Time)
		}
	}
	if h.RequestTime == nil && h.AnswerTime == nil {
		return
	}
	if out, err := json.Marshal(h); err == nil {
		ann[lockmeta.HandoverAnnotationKey] = string(out)
	}
}
