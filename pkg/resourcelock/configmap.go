package resourcelock

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/watchlist"
)

// ConfigMapLock keeps the record as JSON in the LeaderAnnotationKey annotation
// of a ConfigMap. This is the lock istiod uses for its prioritized elections.
// A ConfigMap without the annotation holds an empty record (free to take);
// writes replace only that annotation (and the handover annotation when
// cooperative), keeping every other annotation, label and data key.
type ConfigMapLock struct {
	objectLock[*corev1.ConfigMap, *corev1.ConfigMapList]
}

// configMapKind is where the record lives in a ConfigMap.
var configMapKind = kindAdapter[*corev1.ConfigMap]{
	kind: "ConfigMap", apiVersion: "v1",
	newObject: func(namespace, name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	},
	copyObject: (*corev1.ConfigMap).DeepCopy,
	readRecord: func(cm *corev1.ConfigMap) (*Record, []byte, error) {
		raw, found := cm.Annotations[LeaderAnnotationKey]
		if !found {
			return &Record{}, nil, nil
		}
		rec, err := DecodeRecord([]byte(raw))
		if err != nil {
			return nil, []byte(raw), err
		}
		return rec, []byte(raw), nil
	},
	writeRecord: func(cm *corev1.ConfigMap, r Record) {
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[LeaderAnnotationKey] = string(EncodeRecord(r))
	},
	resource: corev1.SchemeGroupVersion.WithResource("configmaps"),
	// The record is an annotation: a watch of the metadata sees it all.
	fromMetadata: func(m metav1.ObjectMeta) *corev1.ConfigMap { return &corev1.ConfigMap{ObjectMeta: m} },
}

// NewConfigMapLock returns a lock on the ConfigMap namespace/name. It does not
// talk to the API server.
func NewConfigMapLock(client corev1client.ConfigMapsGetter, namespace, name string, cfg Config) (*ConfigMapLock, error) {
	if err := validateLocation(namespace, name, cfg); err != nil {
		return nil, err
	}
	return &ConfigMapLock{objectLock[*corev1.ConfigMap, *corev1.ConfigMapList]{
		client: ownStackClient[*corev1.ConfigMap, *corev1.ConfigMapList]{client.ConfigMaps(namespace)}, namespace: namespace, name: name, cfg: cfg, kind: configMapKind,
		clientNoWatchList: watchlist.DoesClientNotSupportWatchListSemantics(client), hubKey: client,
	}}, nil
}
