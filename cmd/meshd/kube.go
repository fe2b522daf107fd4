package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

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

// client connects to the cluster.
func (k *kubeFlags) client() (kubernetes.Interface, error) {
	cfg, err := restConfig(k.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = fmt.Sprintf("meshd/%s (%s/%s)", buildVersion(), runtime.GOOS, runtime.GOARCH)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return client, nil
}

// restConfig finds the cluster in the usual order: an explicit kubeconfig,
// $KUBECONFIG (which may list several files), the in-cluster service
// account, then ~/.kube/config.
func restConfig(kubeconfig string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	if kubeconfig == "" && os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no cluster to talk to (tried --kubeconfig, $KUBECONFIG, in-cluster config, ~/.kube/config): %w", err)
	}
	return cfg, nil
}
