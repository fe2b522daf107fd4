// Package multicluster finds the remote clusters of a mesh the way istiod
// does: from Secrets in the control plane's namespace labelled
// istio/multiCluster=true, each data key naming a cluster (its cluster ID)
// and holding a kubeconfig of that cluster.
//
// The package reads and checks those Secrets (Parse, RESTConfig), keeps the
// set of clusters up to date while they are added, changed and removed
// (Watcher), and decides whether an external control plane may join a
// remote cluster's elections (ShouldJoin). What runs for each cluster is
// the caller's business: the Watcher hands every change to a Handler, one
// at a time.
//
// A kubeconfig comes from whoever may write Secrets in the namespace, so it
// may name a server and credentials but nothing that runs or reads on this
// machine: credential plugins (exec), auth providers and paths to files are
// refused with an error naming the field.
package multicluster
