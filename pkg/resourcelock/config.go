package resourcelock

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/go-multierror"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/watchlist"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

// EventRecorder is the subset of client-go's record.EventRecorder a lock uses.
type EventRecorder interface {
	Eventf(object runtime.Object, eventType, reason, messageFmt string, args ...any)
}

// Config is what every lock needs besides the object it lives in.
type Config struct {
	// Identity is the holder identity written while this candidate leads.
	Identity string
	// Key is the holder key written while this candidate leads. May be empty.
	Key string
	// EventRecorder, if set, receives events about the lock object.
	EventRecorder EventRecorder
	// Cooperative makes every record write also write the handover
	// annotation (leader.meshd.io/handover) naming the new holder, which
	// tells candidates that the holder honours handover requests.
	Cooperative bool
	// HolderPod, if set, supplies the Pod mark (the annotation
	// leader.meshd.io/holder-pod) that every write of a record naming
	// Identity carries; any other write removes the mark. Nil leaves the
	// annotation as the lock finds it. Package election sets it for
	// WithPodIdentity.
	HolderPod lockmeta.HolderPodSource
}

// Lock kinds accepted by New.
const (
	ConfigMapsResourceLock = "configmaps"
	LeasesResourceLock     = "leases"
	// ConfigMapsLeasesResourceLock holds both a ConfigMap (primary) and a
	// Lease of the same name: the migration step from ConfigMap to Lease
	// (see newMultiLock).
	ConfigMapsLeasesResourceLock = "configmapsleases"
	// LeasesConfigMapsResourceLock holds both, the Lease as primary: the
	// migration step from Lease back to ConfigMap.
	LeasesConfigMapsResourceLock = "leasesconfigmaps"
)

// New builds a lock of the given kind ("configmaps" or "leases") named name
// in namespace.
func New(kind, namespace, name string, client kubernetes.Interface, cfg Config) (Interface, error) {
	// Each case checks err itself: returning the constructor's results
	// directly would turn a nil *ConfigMapLock into a non-nil Interface.
	noWatchList := watchlist.DoesClientNotSupportWatchListSemantics(client)
	switch kind {
	case ConfigMapsResourceLock:
		l, err := NewConfigMapLock(client.CoreV1(), namespace, name, cfg)
		if err != nil {
			return nil, err
		}
		l.noWatchList, l.hubKey = noWatchList, client
		return l, nil
	case LeasesResourceLock:
		l, err := NewLeaseLock(client.CoordinationV1(), namespace, name, cfg)
		if err != nil {
			return nil, err
		}
		l.noWatchList, l.hubKey = noWatchList, client
		return l, nil
	case ConfigMapsLeasesResourceLock, LeasesConfigMapsResourceLock:
		first, second := ConfigMapsResourceLock, LeasesResourceLock
		if kind == LeasesConfigMapsResourceLock {
			first, second = second, first
		}
		primary, err := New(first, namespace, name, client, cfg)
		if err != nil {
			return nil, err
		}
		secondary, err := New(second, namespace, name, client, cfg)
		if err != nil {
			return nil, err
		}
		return newMultiLock(primary, secondary)
	default:
		return nil, fmt.Errorf("unknown lock kind %q: want %q, %q, %q or %q", kind, ConfigMapsResourceLock, LeasesResourceLock,
			ConfigMapsLeasesResourceLock, LeasesConfigMapsResourceLock)
	}
}

// validateLocation reports every problem with where a lock lives and who
// writes it.
func validateLocation(namespace, name string, cfg Config) error {
	var errs *multierror.Error
	if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		errs = multierror.Append(errs, fmt.Errorf("invalid lock namespace %q: %s", namespace, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		errs = multierror.Append(errs, fmt.Errorf("invalid lock name %q: %s", name, strings.Join(msgs, "; ")))
	}
	if cfg.Identity == "" {
		errs = multierror.Append(errs, errors.New("lock identity must not be empty"))
	}
	return errs.ErrorOrNil()
}
