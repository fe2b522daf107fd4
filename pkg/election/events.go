package election

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// eventComponent is the source component of the Events recorded with
// WithEvents.
const eventComponent = "meshd"

// eventSink records Events through a broadcaster that runs only between
// start and the stop function start returns. Locks are built before that and
// keep the sink; what they record outside that time is dropped.
type eventSink struct {
	client kubernetes.Interface

	mu       sync.RWMutex
	recorder record.EventRecorder
}

func newEventSink(client kubernetes.Interface) *eventSink {
	if client == nil {
		return nil
	}
	return &eventSink{client: client}
}

// start runs the broadcaster; the function it returns stops it, dropping
// events still queued.
func (s *eventSink) start() (stop func()) {
	if s == nil {
		return func() {}
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.client.CoreV1().Events("")})
	s.set(b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: eventComponent}))
	return func() {
		s.set(nil) // first, so that late events are dropped here
		b.Shutdown()
	}
}

func (s *eventSink) set(r record.EventRecorder) {
	s.mu.Lock()
	s.recorder = r
	s.mu.Unlock()
}

// Eventf implements resourcelock.EventRecorder.
func (s *eventSink) Eventf(object runtime.Object, eventType, reason, messageFmt string, args ...any) {
	s.mu.RLock()
	r := s.recorder
	s.mu.RUnlock()
	if r != nil {
		r.Eventf(object, eventType, reason, messageFmt, args...)
	}
}

// discardEvents drops every Event.
type discardEvents struct{}

func (discardEvents) Eventf(runtime.Object, string, string, string, ...any) {}
