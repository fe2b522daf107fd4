package controllers

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
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
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: want.Name, Namespace: want.Namespace, Labels: maps.Clone(want.Labels)},
			Data:       maps.Clone(want.Data),
		}
		if _, err := client.ConfigMaps(want.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return false, fmt.Errorf("create ConfigMap %s/%s: %w", want.Namespace, want.Name, err)
		}
		return true, nil
	}
	if Owns(current, want) {
		return false, nil
	}
	cm := current.DeepCopy()
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
	if _, err := client.ConfigMaps(want.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return false, fmt.Errorf("update ConfigMap %s/%s: %w", want.Namespace, want.Name, err)
	}
	return true, nil
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
