package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/transport"
	"k8s.io/client-go/util/homedir"

	"github.com/meshd-io/meshd/internal/multicluster"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// kubeFlags are the flags every command that talks to a cluster has.
type kubeFlags struct {
	kubeconfig string
	namespace  string
}

func (k *kubeFlags) register(fs *pflag.FlagSet, env *envBindings) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "",
		"path to a kubeconfig; without it: $KUBECONFIG, then the in-cluster service account, then ~/.kube/config")
	env.stringVarP(fs, &k.namespace, "namespace", "n", "POD_NAMESPACE", revisions.DefaultMeshNamespace,
		"namespace of the mesh control plane and its election locks")
}

// Client-side rate limits. client-go's defaults (5/s, burst 10) let a
// controller writing a ConfigMap into every namespace delay lock renewals by
// seconds; elections also get a client, and so a rate limiter, of their own.
const (
	clientQPS   = 50
	clientBurst = 100
)

// client connects to the cluster.
func (k *kubeFlags) client() (kubernetes.Interface, error) {
	clients, err := k.clients(1, nil)
	if err != nil {
		return nil, err
	}
	return clients[0], nil
}

// clients returns n clients of the cluster, each with its own rate limiter.
// wrap, if not nil, wraps their transports.
func (k *kubeFlags) clients(n int, wrap transport.WrapperFunc) ([]kubernetes.Interface, error) {
	cfg, err := restConfig(k.kubeconfig)
	if err != nil {
		return nil, err
	}
	return newClients(cfg, n, wrap)
}

// remoteClients returns n clients of a remote cluster, from the kubeconfig
// of its Secret (checked by multicluster.RESTConfig).
func remoteClients(kubeconfig []byte, n int, wrap transport.WrapperFunc) ([]kubernetes.Interface, error) {
	cfg, err := multicluster.RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	return newClients(cfg, n, wrap)
}

// newClients returns n clients of cfg's cluster, each with its own rate
// limiter.
func newClients(cfg *rest.Config, n int, wrap transport.WrapperFunc) ([]kubernetes.Interface, error) {
	var err error
	if wrap != nil {
		cfg.Wrap(wrap)
	}
	cfg.UserAgent = fmt.Sprintf("meshd/%s (%s/%s)", buildVersion(), runtime.GOOS, runtime.GOARCH)
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = clientQPS, clientBurst
	}
	out := make([]kubernetes.Interface, n)
	for i := range out {
		if out[i], err = kubernetes.NewForConfig(rest.CopyConfig(cfg)); err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
	}
	return out, nil
}

// restConfig finds the cluster in the usual order: an explicit kubeconfig,
// $KUBECONFIG (which may list several files), the in-cluster service
// account, then ~/.kube/config.
func restConfig(kubeconfig string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	// ~/.kube/config of the current $HOME (client-go reads $HOME once, when
	// the program starts).
	home := filepath.Join(homedir.HomeDir(), clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		rules.Precedence = []string{home}
	}
	if kubeconfig == "" && os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		// client-go's own message suggests KUBERNETES_MASTER, which meshd
		// does not read.
		return nil, fmt.Errorf("no cluster to talk to: no --kubeconfig, $KUBECONFIG is not set, "+
			"no in-cluster service account (not running in a Pod) and no %s", home)
	}
	if err != nil {
		return nil, fmt.Errorf("no cluster to talk to (tried --kubeconfig, $KUBECONFIG, in-cluster config, ~/.kube/config): %w", err)
	}
	return cfg, nil
}
