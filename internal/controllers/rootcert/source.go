package rootcert

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Reasons of the Warning Events the controller records.
const (
	// ReasonNoMeshRoot: neither CA Secret exists, nothing is published.
	ReasonNoMeshRoot = "NoMeshRoot"
	// ReasonInvalidMeshRoot: a CA Secret holds no valid certificate.
	ReasonInvalidMeshRoot = "InvalidMeshRoot"
	// ReasonMeshRootMismatch: a remote cluster has a mesh root of its own,
	// other than the one to publish; nothing is published there.
	ReasonMeshRootMismatch = "MeshRootMismatch"
)

// errNoMeshRoot is wrapped by Problem when the mesh has no CA Secret.
var errNoMeshRoot = errors.New("no mesh root certificate")

// invalidRootError is a CA Secret whose root does not parse.
type invalidRootError struct{ err error }

func (e invalidRootError) Error() string { return e.err.Error() }
func (e invalidRootError) Unwrap() error { return e.err }

// syncSource finds the mesh's root, in the order istiod reads it, and
// distributes it. With no CA Secret it publishes nothing (or, only with
// SelfSignedRoot, falls back to the self-signed source) and records why.
func (t *term) syncSource(ctx context.Context) error {
	cert, from, err := t.meshRoot()
	switch {
	case err != nil:
		t.c.setProblem(invalidRootError{err})
		// Retried with backoff; an update of the Secret retries at once.
		return err
	case cert != "":
		t.distribute(cert, from)
		return nil
	case t.c.opts.SelfSignedRoot:
		return t.syncSelfSigned(ctx)
	}
	ns := t.c.opts.MeshNamespace
	t.c.setProblem(fmt.Errorf("%w: neither Secret %s/%s (key %s) nor Secret %s/%s (key %s) exists; "+
		"not publishing %s until one does (minting a self-signed root is a separate setting, off by default)",
		errNoMeshRoot, ns, PluggedCASecret, PluggedRootKey, ns, IstiodCASecret, IstiodCAKey, TargetConfigMap))
	// Not an error to retry: the Secret informers bring the next attempt.
	return nil
}

// meshRoot returns the mesh's root certificate and where it came from:
// Secret cacerts, key root-cert.pem (a CA plugged in by the operator), else
// Secret istio-ca-secret, key ca-cert.pem (the CA istiod generated). A
// Secret without its key is skipped, as istiod does. It returns "" when
// neither has one, and an error when the first one found does not hold PEM
// certificates.
func (t *term) meshRoot() (cert, from string, err error) {
	where := ""
	if t.c.remoteTarget {
		where = " in the control plane's cluster"
	}
	return readMeshRoot(t.caSecrets, t.c.opts.MeshNamespace, where)
}

// readMeshRoot is meshRoot over the CA Secret stores of one cluster; where
// names that cluster in from, when not empty.
func readMeshRoot(stores map[string]cache.Store, namespace, where string) (cert, from string, err error) {
	for _, src := range []struct{ secret, key string }{
		{PluggedCASecret, PluggedRootKey},
		{IstiodCASecret, IstiodCAKey},
	} {
		store := stores[src.secret]
		if store == nil {
			continue
		}
		obj, ok, _ := store.GetByKey(namespace + "/" + src.secret)
		if !ok {
			continue
		}
		secret, isSecret := obj.(*corev1.Secret)
		if !isSecret || len(secret.Data[src.key]) == 0 {
			continue
		}
		cert = string(secret.Data[src.key])
		from = fmt.Sprintf("Secret %s/%s key %s%s", namespace, src.secret, src.key, where)
		if err := checkCertificates(cert); err != nil {
			return "", "", fmt.Errorf("%s: %w; not publishing it", from, err)
		}
		return cert, from, nil
	}
	return "", "", nil
}

// errRootMismatch is wrapped by Problem when a remote cluster has a mesh
// root of its own that is not the one this controller would publish.
var errRootMismatch = errors.New("the cluster's own mesh root differs")

// checkTargetRoot returns an error when the controller writes into a
// remote cluster that has its own CA Secret holding a root other than
// cert: publishing cert there would replace the root its workloads trust.
// A remote cluster without a CA Secret (primary-remote), or with the same
// root (a shared root plugged in as cacerts), is fine.
func (t *term) checkTargetRoot(cert, from string) error {
	if !t.c.remoteTarget {
		return nil
	}
	own, ownFrom, err := readMeshRoot(t.targetCA, t.c.opts.MeshNamespace, " in this cluster")
	if err != nil {
		return fmt.Errorf("%w: %v", errRootMismatch, err)
	}
	if own == "" || sameCertificates(own, cert) {
		return nil
	}
	return fmt.Errorf("%w: %s is not the root read from %s; not publishing %s into this cluster, whose workloads trust its own root",
		errRootMismatch, ownFrom, from, TargetConfigMap)
}

// Problem says why the running term publishes no root certificate: no CA
// Secret, or an invalid one. It is nil while the root is published, and when
// no term runs (a follower has nothing to publish).
func (c *Controller) Problem() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.problem == nil {
		return nil
	}
	return fmt.Errorf("%s controller: %w", Name, c.problem)
}

// clearProblem forgets the problem of a term that ended.
func (c *Controller) clearProblem() {
	c.mu.Lock()
	c.problem = nil
	c.mu.Unlock()
}

// setProblem records the term's problem; a new one is logged and recorded
// as a Warning Event, its end is logged.
func (c *Controller) setProblem(err error) {
	c.mu.Lock()
	old := c.problem
	c.problem = err
	c.mu.Unlock()
	switch {
	case err == nil && old != nil:
		c.log.Info("the mesh root certificate is available again")
	case err != nil && (old == nil || old.Error() != err.Error()):
		c.log.Warn("not publishing the mesh root certificate", zap.Error(err))
		reason := ReasonNoMeshRoot
		var invalid invalidRootError
		switch {
		case errors.Is(err, errRootMismatch):
			reason = ReasonMeshRootMismatch
		case errors.As(err, &invalid):
			reason = ReasonInvalidMeshRoot
		}
		if c.opts.Recorder != nil {
			ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: c.opts.MeshNamespace, Name: PluggedCASecret}
			c.opts.Recorder.Eventf(ref, corev1.EventTypeWarning, reason, "%s", err.Error())
		}
	}
}
