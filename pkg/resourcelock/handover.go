package resourcelock

import (
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

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

// advertise is what a record write leaves in the handover annotation of
// meta, whose decoded value is cur: with cooperation on, the new holder,
// clearing requests addressed to anyone else; otherwise nothing is changed.
// A request addressed to the holder being written stays: it was made while
// the lock was handed to that holder, and the holder answers it once it
// leads. A record naming the candidate whose request the annotation accepts
// with a fence (Handover.FenceMillis) carries that fence on, so that the
// candidate finds it with the record naming it. It returns the annotation's
// value after the write: next, or cur when it is left as it is.
func (c Config) advertise(meta *metav1.ObjectMeta, cur lockmeta.Handover, r Record) lockmeta.Handover {
	if !c.Cooperative {
		return cur
	}
	if r.HolderIdentity != "" && cur.Requested(r.HolderIdentity) {
		return cur
	}
	next := lockmeta.Handover{Holder: r.HolderIdentity}
	if r.HolderIdentity != "" && cur.Candidate == r.HolderIdentity && cur.Answer == lockmeta.AnswerAccepted && cur.HonoursFence {
		next.FenceMillis = cur.FenceMillis
	}
	lockmeta.WriteHandover(meta, next)
	return next
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
