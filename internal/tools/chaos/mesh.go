package chaos

import (
	"context"
	"fmt"
	"maps"
	"os"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"

	"github.com/meshd-io/meshd/internal/controllers/revision"
	"github.com/meshd-io/meshd/internal/controllers/rootcert"
	"github.com/meshd-io/meshd/internal/controllers/status"
	"github.com/meshd-io/meshd/internal/election/lockread"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/resourcelock"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// What the run seeds into objects that meshd writes, and checks at the end:
// meshd must keep what it does not own.
const (
	keepKey     = "chaos.meshd.io/keep" // a label and an annotation
	keepValue   = "must-survive"
	keepDataKey = "chaos-keep" // a data key of ConfigMaps
)

// lockRef is one election of the daemon and the object its lock lives in.
type lockRef struct {
	name string // the lock object's name, which the ledger uses as the election
	kind election.LockKind
}

// daemonLocks are the locks of meshd run's three elections for revisions.
func daemonLocks(revs []string) []lockRef {
	locks := []lockRef{
		{election.NamespaceController, election.ConfigMapLock},
		{status.ElectionID, election.LeaseLock},
	}
	for _, rev := range revs {
		locks = append(locks, lockRef{revision.ElectionID + "-" + rev, election.LeaseLock})
	}
	return locks
}

// mesh is the part of the cluster a run plays with.
type mesh struct {
	client    kubernetes.Interface
	namespace string
	apps      []string // namespaces that get istio-ca-root-cert
	revisions []string
	locks     []lockRef
}

func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 20*time.Second)
}

// setUp creates the namespaces and seeds every object meshd will write with
// content it must keep, and makes revisions[0] the default.
func (m *mesh) setUp(ctx context.Context) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	for _, ns := range append([]string{m.namespace}, m.apps...) {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"meshd.io/chaos": "true"}}}
		if _, err := m.client.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	for _, l := range m.locks {
		if err := m.seedLock(ctx, l); err != nil {
			return err
		}
	}
	owned := []string{status.ConfigMapName}
	for _, rev := range m.revisions {
		owned = append(owned, revision.ConfigMapName(rev))
	}
	for _, name := range owned {
		if err := m.createKeptConfigMap(ctx, m.namespace, name); err != nil {
			return err
		}
	}
	for _, ns := range m.apps {
		if err := m.createKeptConfigMap(ctx, ns, rootcert.TargetConfigMap); err != nil {
			return err
		}
	}
	return m.setDefault(ctx, m.revisions[0])
}

func keptMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns,
		Labels: map[string]string{keepKey: keepValue}, Annotations: map[string]string{keepKey: keepValue}}
}

func (m *mesh) createKeptConfigMap(ctx context.Context, ns, name string) error {
	cm := &corev1.ConfigMap{ObjectMeta: keptMeta(ns, name), Data: map[string]string{keepDataKey: keepValue}}
	if _, err := m.client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("seed ConfigMap %s/%s: %w", ns, name, err)
	}
	return nil
}

// reseedLock puts the seeded content back into a lock that a fault deleted,
// as whoever owns it would, once meshd has recreated it. Creating it here
// instead would write a lock without a record, which reads as released:
// a fault of its own, which the run does not mean to inject. If nobody
// recreates it within wait, it is created after all.
func (m *mesh) reseedLock(ctx context.Context, l lockRef, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		var err error
		gctx, cancel := withTimeout(ctx)
		if l.kind == election.ConfigMapLock {
			_, err = m.client.CoreV1().ConfigMaps(m.namespace).Get(gctx, l.name, metav1.GetOptions{})
		} else {
			_, err = m.client.CoordinationV1().Leases(m.namespace).Get(gctx, l.name, metav1.GetOptions{})
		}
		cancel()
		if err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return m.seedLock(ctx, l)
}

// seedLock creates the lock object, without a record, carrying content meshd
// must keep; if the object exists, the content is added to it.
func (m *mesh) seedLock(ctx context.Context, l lockRef) error {
	// meshd may create the object between our read and our create.
	raced := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	return retry.OnError(retry.DefaultRetry, raced, func() error {
		switch l.kind {
		case election.ConfigMapLock:
			cms := m.client.CoreV1().ConfigMaps(m.namespace)
			cm, err := cms.Get(ctx, l.name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				cm = &corev1.ConfigMap{ObjectMeta: keptMeta(m.namespace, l.name), Data: map[string]string{keepDataKey: keepValue}}
				_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
				return err
			}
			if err != nil {
				return err
			}
			keep(&cm.ObjectMeta)
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[keepDataKey] = keepValue
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			return err
		default:
			leases := m.client.CoordinationV1().Leases(m.namespace)
			lease, err := leases.Get(ctx, l.name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: keptMeta(m.namespace, l.name)}, metav1.CreateOptions{})
				return err
			}
			if err != nil {
				return err
			}
			keep(&lease.ObjectMeta)
			_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
			return err
		}
	})
}

func keep(meta *metav1.ObjectMeta) {
	if meta.Labels == nil {
		meta.Labels = map[string]string{}
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Labels[keepKey] = keepValue
	meta.Annotations[keepKey] = keepValue
}

// setDefault makes revision the default ("" removes the label).
func (m *mesh) setDefault(ctx context.Context, rev string) error {
	hooks := m.client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	name := revisions.DefaultWebhookName(m.namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		wh, err := hooks.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			wh = &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
			setRevisionLabel(wh, rev)
			_, err = hooks.Create(ctx, wh, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		setRevisionLabel(wh, rev)
		_, err = hooks.Update(ctx, wh, metav1.UpdateOptions{})
		return err
	})
}

func setRevisionLabel(wh *admissionv1.MutatingWebhookConfiguration, rev string) {
	if wh.Labels == nil {
		wh.Labels = map[string]string{}
	}
	if rev == "" {
		delete(wh.Labels, revisions.DefaultRevisionLabel)
	} else {
		wh.Labels[revisions.DefaultRevisionLabel] = rev
	}
}

// tearDown deletes the namespaces and the webhook (best effort; in a shared
// test cluster they would otherwise linger).
func (m *mesh) tearDown(ctx context.Context) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	_ = m.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, revisions.DefaultWebhookName(m.namespace), metav1.DeleteOptions{})
	for _, ns := range append([]string{m.namespace}, m.apps...) {
		_ = m.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	}
}

// record reads the record of lock l; a missing object reads as free.
func (m *mesh) record(ctx context.Context, l lockRef) (resourcelock.Record, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	kind := resourcelock.LeasesResourceLock
	if l.kind == election.ConfigMapLock {
		kind = resourcelock.ConfigMapsResourceLock
	}
	rec, err := lockread.Read(ctx, m.client, kind, m.namespace, l.name)
	if err != nil || rec == nil {
		return resourcelock.Record{}, err
	}
	return *rec, nil
}

// rewrite changes the record of lock l by hand and sets the annotations
// extra, keeping the rest of the object.
func (m *mesh) rewrite(ctx context.Context, l lockRef, change func(*resourcelock.Record), extra map[string]string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if l.kind == election.ConfigMapLock {
			cms := m.client.CoreV1().ConfigMaps(m.namespace)
			cm, err := cms.Get(ctx, l.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			var rec resourcelock.Record
			if r, err := resourcelock.DecodeRecord([]byte(cm.Annotations[resourcelock.LeaderAnnotationKey])); err == nil {
				rec = *r
			}
			change(&rec)
			if cm.Annotations == nil {
				cm.Annotations = map[string]string{}
			}
			maps.Copy(cm.Annotations, extra)
			cm.Annotations[resourcelock.LeaderAnnotationKey] = string(resourcelock.EncodeRecord(rec))
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			return err
		}
		leases := m.client.CoordinationV1().Leases(m.namespace)
		lease, err := leases.Get(ctx, l.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		rec := resourcelock.LeaseToRecord(lease)
		change(rec)
		resourcelock.ApplyRecordToLease(*rec, lease)
		if len(extra) > 0 {
			if lease.Annotations == nil {
				lease.Annotations = map[string]string{}
			}
			maps.Copy(lease.Annotations, extra)
		}
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		return err
	})
}

// corrupt writes raw as the record of the ConfigMap lock l.
func (m *mesh) corrupt(ctx context.Context, l lockRef, raw string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	cms := m.client.CoreV1().ConfigMaps(m.namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, l.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[resourcelock.LeaderAnnotationKey] = raw
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}

// deleteLock deletes the object of lock l.
func (m *mesh) deleteLock(ctx context.Context, l lockRef) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var err error
	if l.kind == election.ConfigMapLock {
		err = m.client.CoreV1().ConfigMaps(m.namespace).Delete(ctx, l.name, metav1.DeleteOptions{})
	} else {
		err = m.client.CoordinationV1().Leases(m.namespace).Delete(ctx, l.name, metav1.DeleteOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// deleteLease deletes the Lease name of the run's namespace (gone already is
// fine).
func (m *mesh) deleteLease(ctx context.Context, name string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err := m.client.CoordinationV1().Leases(m.namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// awaitLease waits up to wait for the Lease name of the run's namespace to
// exist.
func (m *mesh) awaitLease(ctx context.Context, name string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		gctx, cancel := withTimeout(ctx)
		_, err := m.client.CoordinationV1().Leases(m.namespace).Get(gctx, name, metav1.GetOptions{})
		cancel()
		switch {
		case err == nil:
			return nil
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("read Lease %s: %w", name, err)
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("Lease %s not created again within %v", name, wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkData returns every piece of seeded content that is gone, and every
// root certificate that is missing or differs from the source.
func (m *mesh) checkData(ctx context.Context) ([]string, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var lost []string
	kept := func(what string, meta metav1.ObjectMeta, data map[string]string, wantData bool) {
		if meta.Labels[keepKey] != keepValue {
			lost = append(lost, what+": label "+keepKey)
		}
		if meta.Annotations[keepKey] != keepValue {
			lost = append(lost, what+": annotation "+keepKey)
		}
		if wantData && data[keepDataKey] != keepValue {
			lost = append(lost, what+": data key "+keepDataKey)
		}
	}
	for _, l := range m.locks {
		what := fmt.Sprintf("%s %s/%s", l.kind, m.namespace, l.name)
		if l.kind == election.ConfigMapLock {
			cm, err := m.client.CoreV1().ConfigMaps(m.namespace).Get(ctx, l.name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", what, err)
			}
			kept(what, cm.ObjectMeta, cm.Data, true)
			if _, err := resourcelock.DecodeRecord([]byte(cm.Annotations[resourcelock.LeaderAnnotationKey])); err != nil {
				lost = append(lost, what+": record left corrupt: "+err.Error())
			}
			continue
		}
		lease, err := m.client.CoordinationV1().Leases(m.namespace).Get(ctx, l.name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", what, err)
		}
		kept(what, lease.ObjectMeta, nil, false)
	}
	owned := []string{status.ConfigMapName}
	for _, rev := range m.revisions {
		owned = append(owned, revision.ConfigMapName(rev))
	}
	for _, name := range owned {
		cm, err := m.client.CoreV1().ConfigMaps(m.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read ConfigMap %s/%s: %w", m.namespace, name, err)
		}
		kept("ConfigMap "+m.namespace+"/"+name, cm.ObjectMeta, cm.Data, true)
	}
	src, err := m.client.CoreV1().ConfigMaps(m.namespace).Get(ctx, rootcert.DefaultSourceConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read the root certificate source: %w", err)
	}
	cert := src.Data[rootcert.DefaultSourceKey]
	for _, ns := range m.apps {
		what := "ConfigMap " + ns + "/" + rootcert.TargetConfigMap
		cm, err := m.client.CoreV1().ConfigMaps(ns).Get(ctx, rootcert.TargetConfigMap, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", what, err)
		}
		kept(what, cm.ObjectMeta, cm.Data, true)
		if cert == "" || cm.Data[rootcert.TargetKey] != cert {
			lost = append(lost, what+": "+rootcert.TargetKey+" is not the source certificate")
		}
	}
	return lost, nil
}

// writeKubeconfig writes a kubeconfig that reaches the cluster of cfg
// through server (the instance's proxy) with cfg's credentials.
func writeKubeconfig(path string, cfg *rest.Config, server string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["chaos"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["chaos"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["chaos"] = &clientcmdapi.Context{Cluster: "chaos", AuthInfo: "chaos"}
	kc.CurrentContext = "chaos"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}
