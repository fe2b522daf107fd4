// Package controllers holds what meshd's leader-gated controllers share: the
// Controller interface, their Prometheus counters, the work-queue loop and
// the ConfigMap write they all use. The controllers themselves live in
// subpackages:
//
//   - rootcert: the namespace controller (istiod's election
//     istio-namespace-controller-election) copies the mesh's root
//     certificate, read from the mesh CA's Secret as istiod reads it, into
//     the ConfigMap istio-ca-root-cert of every namespace;
//   - status: the status controller (meshd's election meshd-status-leader)
//     writes which revisions run and who leads every election into
//     meshd-status;
//   - revision: the per-revision controller (meshd's Lease
//     meshd-revision-<rev>) lists the namespaces of one revision in
//     meshd-revision-<rev>.
//
// A controller takes istiod's election only when it does istiod's job for
// that election with the same data; docs/controllers.md lists each one.
//
// # Lifecycle
//
// A controller is built once and its Run is called once per term of
// leadership, so Run may be called many times by one process. Every Run
// creates its own informers and queue and, before it returns, stops its
// workers, then waits for its informers to stop. Nothing a controller starts
// outlives Run, and no write is issued after Run has returned; a write in
// flight when ctx ends is cancelled with ctx. Terms may overlap when the
// election framework gives up waiting for an old term: each Run keeps its
// state to itself, so overlapping calls are safe.
//
// What a controller does not guarantee: leadership is judged by the
// election, not re-checked before each write, so a deposed leader may issue
// writes until its ctx is cancelled (the election has no fencing). All
// writes are idempotent and use optimistic concurrency, so the next leader
// converges whatever the previous one left behind.
package controllers
