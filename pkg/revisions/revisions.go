// Package revisions tells which control-plane revision is the mesh's default.
//
// Like istiod, meshd takes the default revision from a label of a
// cluster-scoped MutatingWebhookConfiguration: by default the label
// istio.io/rev of istio-revision-tag-default (istio-revision-tag-default-<ns>
// when the mesh namespace is not istio-system). A missing object, a missing
// label and an empty label value all mean that no default is known, reported
// as the empty string.
//
// A DefaultWatcher follows that object and calls handlers when the default
// changes; NewDefaultWatcher builds one on a client-go informer that lists and
// watches only the one object by name.
//
// Limits: the value is as fresh as the watch. Between a change on the API
// server and the handler call there is the watch latency, and while the watch
// is broken the last known value stays in effect; nothing here guarantees that
// two processes agree on the default at the same instant.
package revisions

import (
	"go.uber.org/zap"

	"github.com/meshd-io/meshd/internal/election/revisionopts"
)

const (
	// DefaultMeshNamespace is the mesh namespace assumed when none is given.
	DefaultMeshNamespace = "istio-system"
	// DefaultRevisionLabel is the label of the webhook that holds the default
	// revision.
	DefaultRevisionLabel = "istio.io/rev"
	// defaultWebhookBase is the webhook name used in istio-system.
	defaultWebhookBase = "istio-revision-tag-default"
)

// DefaultWatcher reports the default revision of the mesh.
type DefaultWatcher interface {
	// Run follows the default revision until stop is closed, then returns
	// once everything it started has stopped, including a handler call in
	// progress. Call it once; a later call only waits for stop.
	Run(stop <-chan struct{})
	// HasSynced reports whether the initial state has been read and the
	// handlers have been called for it; from then on GetDefault reflects the
	// cluster (up to watch latency).
	HasSynced() bool
	// GetDefault returns the default revision, "" when none is known
	// (including before HasSynced).
	GetDefault() string
	// AddHandler registers h to be called with the new default revision on
	// every change of it, including a change to "" (no default known).
	// Updates of the object that leave the value unchanged do not call
	// handlers. Handlers are called one at a time, in registration order,
	// without any lock of the watcher held, so they may call GetDefault and
	// AddHandler. They should return quickly: later changes wait for them. A
	// handler added after a change does not see it retroactively: read
	// GetDefault after AddHandler for the current value.
	AddHandler(h func(revision string))
}

// DefaultWebhookName returns the name istiod gives the webhook marking the
// default revision: istio-revision-tag-default in istio-system (or for an
// empty namespace), istio-revision-tag-default-<meshNamespace> otherwise.
func DefaultWebhookName(meshNamespace string) string {
	if meshNamespace == "" || meshNamespace == DefaultMeshNamespace {
		return defaultWebhookBase
	}
	return defaultWebhookBase + "-" + meshNamespace
}

// Options configure NewDefaultWatcher. The zero value follows istiod in
// istio-system.
type Options struct {
	// MeshNamespace is the namespace of the control plane; default
	// "istio-system". It only serves to derive the default WebhookName.
	MeshNamespace string
	// WebhookName is the MutatingWebhookConfiguration to follow; default
	// DefaultWebhookName(MeshNamespace). It must be a valid object name (DNS
	// subdomain).
	WebhookName string
	// RevisionLabel is the label holding the default revision; default
	// "istio.io/rev". It must be a valid label key.
	RevisionLabel string
	// Logger receives the watcher's logs; default a no-op logger.
	Logger *zap.Logger
}

// withDefaults fills the empty fields.
func (o Options) withDefaults() Options {
	if o.MeshNamespace == "" {
		o.MeshNamespace = DefaultMeshNamespace
	}
	if o.WebhookName == "" {
		o.WebhookName = DefaultWebhookName(o.MeshNamespace)
	}
	if o.RevisionLabel == "" {
		o.RevisionLabel = DefaultRevisionLabel
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o
}

// validate reports every invalid field of defaulted options.
func (o Options) validate() error {
	return revisionopts.Validate(o.MeshNamespace, o.WebhookName, o.RevisionLabel)
}
