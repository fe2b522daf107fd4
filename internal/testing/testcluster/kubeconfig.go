package testcluster

import (
	"os"
	"path/filepath"
	"slices"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigContext is the name of the admin context (the current context)
// in files written by WriteKubeconfig. Each other static user gets a context
// named KubeconfigContext + "-" + user name.
const KubeconfigContext = "meshd-local"

// WriteKubeconfig writes a kubeconfig file (mode 0600) for the cluster. Its
// current context acts as AdminUser; it also has one context per other
// static user, for example "meshd-local-meshd-restricted-1".
func (c *Cluster) WriteKubeconfig(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*c.kubeconfig(), path)
}

// Kubeconfig returns the contents of a kubeconfig that acts as AdminUser,
// with everything inline (no file paths) and one context, as a remote
// cluster's Secret holds it.
func (c *Cluster) Kubeconfig() ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[KubeconfigContext] = &clientcmdapi.Cluster{
		Server:                   c.Config.Host,
		CertificateAuthorityData: c.Config.CAData,
	}
	cfg.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{Token: c.users[AdminUser].token}
	cfg.Contexts[KubeconfigContext] = &clientcmdapi.Context{Cluster: KubeconfigContext, AuthInfo: AdminUser}
	cfg.CurrentContext = KubeconfigContext
	return clientcmd.Write(*cfg)
}

// kubeconfig is the configuration WriteKubeconfig writes.
func (c *Cluster) kubeconfig() *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[KubeconfigContext] = &clientcmdapi.Cluster{
		Server:                   c.Config.Host,
		CertificateAuthorityData: c.Config.CAData,
	}
	names := make([]string, 0, len(c.users))
	for n := range c.users {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		ctxName := KubeconfigContext
		if n != AdminUser {
			ctxName += "-" + n
		}
		cfg.AuthInfos[n] = &clientcmdapi.AuthInfo{Token: c.users[n].token}
		cfg.Contexts[ctxName] = &clientcmdapi.Context{Cluster: KubeconfigContext, AuthInfo: n, Namespace: "default"}
	}
	cfg.CurrentContext = KubeconfigContext
	return cfg
}
