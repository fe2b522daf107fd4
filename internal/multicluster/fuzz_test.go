package multicluster

import (
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// A remote cluster's kubeconfig is untrusted input: whatever it holds,
// RESTConfig returns an error or a configuration with a server that runs
// no program and reads no file.
func FuzzRESTConfig(f *testing.F) {
	f.Add(kubeconfig(f, "https://127.0.0.1:6443", nil))
	f.Add(kubeconfig(f, "https://127.0.0.1:6443", func(c *clientcmdapi.Config) {
		c.AuthInfos["u"].Exec = &clientcmdapi.ExecConfig{Command: "some-credential-plugin", APIVersion: "client.authentication.k8s.io/v1"}
	}))
	f.Add(kubeconfig(f, "https://127.0.0.1:6443", func(c *clientcmdapi.Config) { c.AuthInfos["u"].TokenFile = "token" }))
	f.Add([]byte("apiVersion: v1\nkind: Config\n"))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Config","contexts":[{"name":"x","context":{"cluster":"c","user":"u"}}],` +
		`"clusters":[{"name":"c","cluster":{"server":"https://a"}}],"users":[{"name":"u","user":{"auth-provider":{"name":"oidc"}}}]}`))
	f.Add([]byte("{{{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := RESTConfig(data)
		if err != nil {
			return
		}
		if cfg.Host == "" {
			t.Fatal("accepted without a server")
		}
		if cfg.ExecProvider != nil || cfg.AuthProvider != nil {
			t.Fatalf("accepted with a credential plugin or auth provider: %+v %+v", cfg.ExecProvider, cfg.AuthProvider)
		}
		if cfg.BearerTokenFile != "" || cfg.CAFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" {
			t.Fatalf("accepted with a file: token %q ca %q cert %q key %q", cfg.BearerTokenFile, cfg.CAFile, cfg.CertFile, cfg.KeyFile)
		}
	})
}
