package controllers

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/election/fence"
)

// OwnedConfigMap is the part of a ConfigMap a controller owns: some labels
// and some data keys. Everything else in the object belongs to others and is
// kept on every write.
type OwnedConfigMap struct {
	Namespace string
	Name      string
	Labels    map[string]string
	Data      map[string]string
}

// ApplyConfigMap makes the ConfigMap carry want's labels and data keys.
// current is the object as cached, nil when the cache has none. If current
// is nil the object is created; if any owned label or key differs it is
// updated from current, so a concurrent write fails with a Conflict instead
// of being overwritten; otherwise nothing is sent. It reports whether it
// wrote.
func ApplyConfigMap(ctx context.Context, client corev1client.ConfigMapsGetter, current *corev1.ConfigMap, want OwnedConfigMap) (bool, error) {
	if current == nil {
		return create(ctx, client, newOwned(want))
	}
	if Owns(current, want) {
		return false, nil
	}
	cm := current.DeepCopy()
	applyOwned(cm, want)
	if _, err := client.ConfigMaps(want.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return false, fmt.Errorf("update ConfigMap %s/%s: %w", want.Namespace, want.Name, err)
	}
	return true, nil
}

// ApplyFencedConfigMap is ApplyConfigMap for a ConfigMap only meshd writes,
// fenced by the election term of ctx (see package fence): every write
// stamps the object with that term, and a write from a term older than the
// stamp is refused with an error wrapping fence.ErrStaleTerm, so a leader
// paused past its lease cannot overwrite its successor's work. A context
// without a term (one not from an election's run function) is an error
// wrapping fence.ErrNoTerm. current, the cached object, only saves writes
// that would change nothing; an update reads the latest version first.
func ApplyFencedConfigMap(ctx context.Context, client corev1client.ConfigMapsGetter, current *corev1.ConfigMap, want OwnedConfigMap) (bool, error) {
	term, ok := election.TermFrom(ctx)
	if !ok {
		return false, fmt.Errorf("write ConfigMap %s/%s: %w", want.Namespace, want.Name, fence.ErrNoTerm)
	}
	if current == nil {
		cm := newOwned(want)
		fence.Stamp(cm, term)
		return create(ctx, client, cm)
	}
	if Owns(current, want) {
		return false, nil
	}
	_, err := fence.Update(ctx, client.ConfigMaps(want.Namespace), want.Name, func(cm *corev1.ConfigMap) error {
		applyOwned(cm, want)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("update ConfigMap %s/%s: %w", want.Namespace, want.Name, err)
	}
	return true, nil
}

func newOwned(want OwnedConfigMap) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: want.Name, Namespace: want.Namespace, Labels: maps.Clone(want.Labels)},
		Data:       maps.Clone(want.Data),
	}
}

func create(ctx context.Context, client corev1client.ConfigMapsGetter, cm *corev1.ConfigMap) (bool, error) {
	if _, err := client.ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return false, fmt.Errorf("create ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return true, nil
}

// applyOwned sets want's labels and data keys in cm, keeping the rest.
func applyOwned(cm *corev1.ConfigMap, want OwnedConfigMap) {
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	maps.Copy(cm.Labels, want.Labels)
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	maps.Copy(cm.Data, want.Data)
	for k := range want.Data {
		// A key may live in Data or BinaryData, not both.
		delete(cm.BinaryData, k)
	}
}

// Owns reports whether cm already carries want's labels and data keys.
func Owns(cm *corev1.ConfigMap, want OwnedConfigMap) bool {
	for k, v := range want.Labels {
		if got, ok := cm.Labels[k]; !ok || got != v {
			return false
		}
	}
	for k, v := range want.Data {
		if got, ok := cm.Data[k]; !ok || got != v {
			return false
		}
		if _, dup := cm.BinaryData[k]; dup {
			return false
		}
	}
	return true
}
