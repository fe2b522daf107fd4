package multicluster

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	// SecretLabel marks the Secrets that hold remote clusters' kubeconfigs;
	// its value is "true".
	SecretLabel = "istio/multiCluster"
	// ControlPlaneClustersAnnotation, on a remote cluster's mesh namespace,
	// lists the clusters whose external control plane may run that
	// cluster's controllers ("*" for any), comma-separated.
	ControlPlaneClustersAnnotation = "topology.istio.io/controlPlaneClusters"
	// DefaultClusterID is the ID of the local cluster when none is given,
	// istiod's default.
	DefaultClusterID = "Kubernetes"
)

// Cluster is one remote cluster, read from one key of one Secret.
type Cluster struct {
	// ID is the cluster ID, the Secret's data key.
	ID string
	// Secret is the Secret it was read from, <namespace>/<name>.
	Secret string
	// Kubeconfig is the key's value.
	Kubeconfig []byte
}

// Hash identifies the cluster's kubeconfig: a change of the Secret that
// does not change it leaves the cluster running.
func (c Cluster) Hash() string {
	sum := sha256.Sum256(c.Kubeconfig)
	return hex.EncodeToString(sum[:8])
}

// Parse returns the clusters of one Secret, in key order. The key equal to
// localID is skipped, as istiod does: the local cluster is not remote. An
// empty value is an error of that key; the other keys are still returned.
func Parse(secret *corev1.Secret, localID string) ([]Cluster, []error) {
	name := secret.Namespace + "/" + secret.Name
	keys := make([]string, 0, len(secret.Data))
	for k := range secret.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var (
		out  []Cluster
		errs []error
	)
	for _, id := range keys {
		if id == localID {
			continue
		}
		data := secret.Data[id]
		if len(data) == 0 {
			errs = append(errs, &ClusterError{ID: id, Secret: name, Err: errors.New("empty kubeconfig")})
			continue
		}
		if msgs := validation.IsConfigMapKey(id); len(msgs) > 0 {
			errs = append(errs, &ClusterError{ID: id, Secret: name, Err: fmt.Errorf("invalid cluster ID: %s", strings.Join(msgs, "; "))})
			continue
		}
		out = append(out, Cluster{ID: id, Secret: name, Kubeconfig: data})
	}
	return out, errs
}

// ClusterError is a problem with one cluster of one Secret.
type ClusterError struct {
	ID     string
	Secret string
	Err    error
}

func (e *ClusterError) Error() string {
	return fmt.Sprintf("cluster %q from Secret %s: %v", e.ID, e.Secret, e.Err)
}

func (e *ClusterError) Unwrap() error { return e.Err }

// RESTConfig reads a remote cluster's kubeconfig: its current context, or
// its only context when no current one is set. It refuses anything that
// would run a program or read a file on this machine (exec credential
// plugins, auth providers, token, certificate and key files), and a
// kubeconfig without a server; the error says which.
func RESTConfig(kubeconfig []byte) (*rest.Config, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("not a kubeconfig: %w", err)
	}
	if cfg.CurrentContext == "" && len(cfg.Contexts) == 1 {
		for name := range cfg.Contexts {
			cfg.CurrentContext = name
		}
	}
	if cfg.CurrentContext == "" {
		return nil, fmt.Errorf("kubeconfig has %d contexts and no current-context", len(cfg.Contexts))
	}
	if err := checkContained(cfg); err != nil {
		return nil, err
	}
	rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, cfg.CurrentContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig context %q: %w", cfg.CurrentContext, err)
	}
	if rc.Host == "" {
		return nil, fmt.Errorf("kubeconfig context %q names no server", cfg.CurrentContext)
	}
	return rc, nil
}

// checkContained reports every field of the current context's cluster and
// user that points outside the kubeconfig itself.
func checkContained(cfg *clientcmdapi.Config) error {
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return fmt.Errorf("kubeconfig current-context %q does not exist", cfg.CurrentContext)
	}
	var bad []string
	if cl, ok := cfg.Clusters[ctx.Cluster]; ok {
		if cl.CertificateAuthority != "" {
			bad = append(bad, "cluster certificate-authority (a file; use certificate-authority-data)")
		}
	}
	if u, ok := cfg.AuthInfos[ctx.AuthInfo]; ok {
		if u.Exec != nil {
			bad = append(bad, "user exec (a credential plugin would run a program)")
		}
		if u.AuthProvider != nil {
			bad = append(bad, fmt.Sprintf("user auth-provider %q", u.AuthProvider.Name))
		}
		if u.TokenFile != "" {
			bad = append(bad, "user tokenFile (a file; use token)")
		}
		if u.ClientCertificate != "" || u.ClientKey != "" {
			bad = append(bad, "user client-certificate or client-key (files; use client-certificate-data and client-key-data)")
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("kubeconfig context %q uses what a remote cluster's Secret may not: %s", cfg.CurrentContext, strings.Join(bad, "; "))
	}
	return nil
}
