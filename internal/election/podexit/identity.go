package podexit

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/meshd-io/meshd/internal/errlist"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Identity is what a process knows about the Pod it runs in, typically
// from the downward API: the Pod's namespace, name and UID and the name of
// its own container, plus a reading of its own clock taken while it runs.
type Identity struct {
	Namespace string
	Pod       string
	UID       string
	Container string
	// ProcessStart is a moment at which this process was running, on its
	// own clock: the earlier the better, ideally read first thing in main
	// (a later reading is still sound, but a holder publishes its run only
	// when its container's start, as the kubelet reports it, lies within
	// StartPrecision before ProcessStart). Zero means when the Publisher
	// was built.
	ProcessStart time.Time
}

// Validate reports every problem of id at once.
func (id Identity) Validate() error {
	var errs *multierror.Error
	check := func(what, value string, msgs []string) {
		if value == "" {
			errs = multierror.Append(errs, fmt.Errorf("pod identity: %s must be set", what))
			return
		}
		if len(msgs) > 0 {
			errs = multierror.Append(errs, fmt.Errorf("pod identity: invalid %s %q: %s", what, value, strings.Join(msgs, "; ")))
		}
	}
	check("namespace", id.Namespace, validation.IsDNS1123Label(id.Namespace))
	check("pod name", id.Pod, validation.IsDNS1123Subdomain(id.Pod))
	check("container name", id.Container, validation.IsDNS1123Label(id.Container))
	var uidMsgs []string
	if len(id.UID) > 128 || strings.ContainsAny(id.UID, " \t\n/") {
		uidMsgs = []string{"a UID has no spaces or slashes and at most 128 characters"}
	}
	check("pod UID", id.UID, uidMsgs)
	if errs == nil {
		return nil
	}
	errs.ErrorFormat = errlist.OneLine
	return fmt.Errorf("%w: %w", ErrInvalidIdentity, errs)
}

// ErrInvalidIdentity is wrapped by every error of Identity.Validate.
var ErrInvalidIdentity = errors.New("invalid pod identity")

// Key names the Pod of id as the watches do.
func (id Identity) Key() string { return id.Namespace + "/" + id.Pod }
