// Package rootcert is meshd's namespace controller, run by the leader of
// istiod's election istio-namespace-controller-election (ElectionID). It
// does istiod's job for that election with istiod's data: it keeps the
// ConfigMap istio-ca-root-cert, data key root-cert.pem, holding the mesh's
// root certificate in every namespace, and repairs it when it is edited or
// deleted. Whichever of istiod and meshd leads, every namespace gets the
// same root.
//
// # Where the certificate comes from
//
// From the Secrets istiod's CA reads, in the mesh namespace, in istiod's
// order:
//
//  1. Secret cacerts, key root-cert.pem: a CA the operator plugged in;
//  2. Secret istio-ca-secret, key ca-cert.pem: the CA istiod generated.
//
// Both are watched (each through an informer limited to its name, so a Role
// with resourceNames suffices), and a change is distributed at once. The
// value is copied byte for byte; it must be one or more PEM CERTIFICATE
// blocks. A Secret without its key is skipped. A Secret whose key holds no
// valid certificate is an error: nothing new is distributed (what this term
// distributed before stays), and Problem says why.
//
// With neither Secret the controller publishes nothing, keeps watching and
// reports the reason: Problem (which the daemon shows in /readyz and
// /debug/elections), a warning in the log and a Warning Event NoMeshRoot on
// the Secret cacerts. The election goes on: leading without a root only
// means no namespace is written.
//
// # Self-signed root (explicit setting)
//
// Only with Options.SelfSignedRoot, and only while neither CA Secret
// exists, the controller uses a root of its own, kept in the ConfigMap
// Options.SourceConfigMap (default meshd-root-cert, key Options.SourceKey):
// it reads it, or creates it with the certificate this process last
// distributed or a freshly generated self-signed CA certificate (ECDSA
// P-256, ten years; the key is discarded). The create is optimistic, so all
// instances distribute the same root. Never set it beside a live istiod: the
// minted root is not the one sidecars trust, and publishing it breaks mTLS.
//
// # Which namespaces
//
// Every namespace, except terminating ones (the API server refuses new
// objects there) and those in Options.ExcludedNamespaces, which defaults to
// none. istiod skips a few system namespaces; IstiodExcludedNamespaces lists
// them for callers that want the same behaviour. An excluded namespace is
// left alone: a ConfigMap already there is neither updated nor deleted.
//
// # What is written
//
// Only the key root-cert.pem and the label istio.io/config=true are owned;
// every other key, label and annotation of the target ConfigMaps is kept.
// Targets are never deleted.
package rootcert
