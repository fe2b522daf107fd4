// Package revision is meshd's per-revision controller, run by the leader of
// meshd's own per-revision election on the Lease meshd-revision-<rev>
// (ElectionID with election.NewPerRevisionLeaderElection): one leader per
// revision, and each writes only its own revision's ConfigMap. It never
// takes istiod's istio-gateway-deployment-<rev>: holding that would stop
// istiod's gateway controller of the revision.
//
// It writes the ConfigMap meshd-revision-<rev> (ConfigMapName) in the mesh
// namespace with two data keys:
//
//	namespaces  the namespaces labelled istio.io/rev=<rev>, sorted, one per line
//	count       how many there are, in decimal
//
// It watches namespaces with that label selector, so labelling, unlabelling
// (or relabelling to another revision) and deleting a namespace update the
// list within one watch event. Terminating namespaces are left out: they are
// on their way out and no new work should target them. Every other data key,
// label and annotation of the ConfigMap is kept, and an edit or deletion by
// someone else is repaired at once. The ConfigMap is written only when its
// content changes.
package revision
