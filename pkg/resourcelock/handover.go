package resourcelock

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// HandoverAnnotationKey is the annotation, beside the record, in which meshd
// instances coordinate a handover. istiod and client-go ignore it and keep it
// when they update the object, so its Holder field tells whether the current
// holder is a meshd instance that honours handover requests: it is one when
// Holder equals the record's holderIdentity.
const HandoverAnnotationKey = "leader.meshd.io/handover"

// Handover is the content of the HandoverAnnotationKey annotation.
type Handover struct {
	// Holder is the meshd instance that wrote the current record and will
	// honour a request to hand the lock over.
	Holder string `json:"holder"`
	// Candidate, when set, asks Holder to stop and hand the lock to it.
	Candidate string `json:"candidate,omitempty"`
	// CandidateKey is the candidate's holder key, which the holder checks
	// before it agrees.
	CandidateKey string `json:"candidateKey,omitempty"`
	// RequestTime is when the candidate asked, by its clock. A holder ignores
	// a request older than its own lease by its clock, so that a request left
	// behind by a candidate that is gone is never honoured later.
	RequestTime *metav1.Time `json:"requestTime,omitempty"`
	// Answer is Holder's answer to the request of Candidate: AnswerAccepted
	// or AnswerRefused; empty while the request is pending. Readers that do
	// not know the field (older meshd) see a pending request.
	Answer string `json:"answer,omitempty"`
	// StopWithinMillis comes with an accepted answer: the holder's work will
	// have stopped, and the record will name Candidate, within this many
	// milliseconds after the answer is observed. A duration rather than a
	// time, so that the candidate measures it on its own clock, as it does
	// leases. It is never longer than the holder's lease.
	StopWithinMillis int64 `json:"stopWithinMillis,omitempty"`
	// AnswerTime is when the holder answered, by its clock, for people
	// reading the object; nobody's timing is computed from it.
	AnswerTime *metav1.Time `json:"answerTime,omitempty"`
}

// Answers a holder writes into Handover.Answer.
const (
	AnswerAccepted = "accepted"
	AnswerRefused  = "refused"
)

// Requested reports whether h carries a request, answered or not, addressed
// to holder.
func (h Handover) Requested(holder string) bool {
	return h.Candidate != "" && h.Holder == holder
}

// Pending reports whether h carries a request addressed to holder that it
// has not answered yet.
func (h Handover) Pending(holder string) bool {
	return h.Requested(holder) && h.Answer == ""
}

// HandoverLock is implemented by locks that support cooperative handover.
type HandoverLock interface {
	Interface
	// Handover returns the handover annotation of the object version last
	// seen; the zero value when there is none or it cannot be decoded.
	Handover() Handover
	// RequestHandover writes h into the annotation of the object version last
	// seen, leaving the record alone. A concurrent write makes it fail with a
	// Conflict error.
	RequestHandover(ctx context.Context, h Handover) error
}

// Watchable is implemented by locks whose object can be followed by a watch.
type Watchable interface {
	Interface
	// ListWatch lists and watches only the lock object.
	ListWatch() cache.ListerWatcher
	// ExampleObject is an empty object of the lock's type.
	ExampleObject() runtime.Object
	// Observe takes an object delivered by the watch as the version last
	// seen, unless the lock already holds a newer one, and returns the record
	// of the version it now holds, as Get would. With deleted set, obj (which
	// may be a cache.DeletedFinalStateUnknown) was deleted: the lock forgets
	// its object and returns an empty record. An object other than the lock's
	// own yields ErrForeignObject and changes nothing.
	Observe(obj any, deleted bool) (*Record, []byte, error)
	// Peek returns the record of the version last seen without a request;
	// ErrNotInitialized when there is none.
	Peek() (*Record, []byte, error)
}

// ErrForeignObject is returned by Watchable.Observe for an object that is not
// the lock's own (a watch that ignored its field selector).
var ErrForeignObject = errors.New("object is not the lock object")

// ownObject unwraps a deletion tombstone and reports whether obj is the
// object namespace/name.
func ownObject(obj any, namespace, name string) (runtime.Object, bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(interface {
		runtime.Object
		GetName() string
		GetNamespace() string
	})
	if !ok || o.GetName() != name || o.GetNamespace() != namespace {
		return nil, false
	}
	return o, true
}

// listWatch restricts a ListWatch to one object and tells the reflector
// whether the client can stream the initial list (fake clientsets cannot).
type listWatch struct {
	cache.ListWatch
	noWatchList bool
}

// IsWatchListSemanticsUnSupported is consulted by client-go's reflector.
func (lw *listWatch) IsWatchListSemanticsUnSupported() bool { return lw.noWatchList }

// readHandover decodes the annotation of an object; zero when absent or bad.
func readHandover(annotations map[string]string) Handover {
	var h Handover
	if raw, ok := annotations[HandoverAnnotationKey]; ok {
		if err := json.Unmarshal([]byte(raw), &h); err != nil {
			return Handover{}
		}
	}
	return h
}

// writeHandover sets the annotation; a zero Handover removes it.
func writeHandover(meta *metav1.ObjectMeta, h Handover) {
	if h == (Handover{}) {
		delete(meta.Annotations, HandoverAnnotationKey)
		return
	}
	raw, _ := json.Marshal(h) // strings and a time: cannot fail
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[HandoverAnnotationKey] = string(raw)
}

// advertise is what a record write leaves in the handover annotation: with
// cooperation on, the new holder, clearing requests addressed to anyone
// else; otherwise nothing is changed. A request addressed to the holder being
// written stays: it was made while the lock was handed to that holder, and the
// holder answers it once it leads.
func (c Config) advertise(meta *metav1.ObjectMeta, r Record) {
	if !c.Cooperative {
		return
	}
	if r.HolderIdentity != "" && readHandover(meta.Annotations).Requested(r.HolderIdentity) {
		return
	}
	writeHandover(meta, Handover{Holder: r.HolderIdentity})
}

// newer reports whether resourceVersion a is newer than b. Resource versions
// are opaque, but the API server's are increasing integers; when either does
// not parse, a is taken as newer so that a watch is never ignored.
func newer(a, b string) bool {
	ai, errA := strconv.ParseUint(a, 10, 64)
	bi, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return true
	}
	return ai > bi
}
