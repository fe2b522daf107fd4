// Package rootcert is meshd's namespace controller, run by the leader of
// istiod's election istio-namespace-controller-election (ElectionID). It
// keeps the ConfigMap istio-ca-root-cert, data key root-cert.pem, holding the
// mesh's root certificate in every namespace, as istiod does, and repairs it
// when it is edited or deleted.
//
// # Where the certificate comes from
//
// The source is a ConfigMap in the mesh namespace (Options.SourceConfigMap,
// default meshd-root-cert, key Options.SourceKey, default root-cert.pem). Its
// value is copied verbatim; it must be one or more PEM CERTIFICATE blocks.
// A source that exists but holds no valid certificate is an error: the
// controller keeps distributing what it distributed before in this term (if
// anything) and never overwrites a source it did not create.
//
// When the source does not exist the controller creates it, so that every
// instance distributes the same certificate: with the certificate this
// process last distributed, if any (deleting the source never rotates the
// root), otherwise with a freshly generated self-signed CA certificate
// (ECDSA P-256, valid for ten years). The create is optimistic: if another
// instance created the source first, its certificate is used. The private
// key of a generated certificate is discarded: meshd does not issue
// workload certificates, and the generated root is a placeholder for meshes
// that have not configured one. To rotate the root, update the source; every
// namespace follows.
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
