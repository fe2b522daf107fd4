package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/lockstatus"
	"github.com/meshd-io/meshd/internal/multicluster"
)

// remoteStatusTimeout bounds the reading of one remote cluster's locks, so
// that an unreachable cluster delays the command by that much at most.
const remoteStatusTimeout = 10 * time.Second

// registerClusters defines the flags of "meshd status --clusters".
func (o *statusOptions) registerClusters(fs *pflag.FlagSet, env *envBindings) {
	fs.BoolVar(&o.clusters, "clusters", false, "also show the locks of every remote cluster named by the Secrets labelled "+multicluster.SecretLabel+"=true")
	env.stringVarP(fs, &o.clusterID, "cluster-id", "", "CLUSTER_ID", multicluster.DefaultClusterID, "ID of the cluster --kubeconfig reaches, with --clusters")
}

// clusterLocks are the locks of one cluster.
type clusterLocks struct {
	id    string
	locks []lockstatus.Lock
}

// runClustersStatus is "meshd status --clusters": the locks of the cluster
// --kubeconfig reaches, then those of every remote cluster its Secrets
// name, in cluster ID order.
func runClustersStatus(cmd *cobra.Command, o statusOptions) error {
	ctx := cmd.Context()
	client, err := o.kube.client()
	if err != nil {
		return err
	}
	ns := o.kube.namespace
	local, err := lockstatus.List(ctx, client, ns)
	if err != nil {
		return err
	}
	if len(local) == 0 {
		if err := namespaceExists(ctx, client, ns); err != nil {
			return err
		}
	}
	all := []clusterLocks{{id: o.clusterID, locks: local}}
	remotes, warnings := remoteClusters(ctx, client, ns, o.clusterID)
	for _, c := range remotes {
		locks, err := remoteLocks(ctx, c, ns)
		if err != nil {
			warnings = append(warnings, (&multicluster.ClusterError{ID: c.ID, Secret: c.Secret, Err: err}).Error())
			continue
		}
		all = append(all, clusterLocks{id: c.ID, locks: locks})
	}
	for _, w := range warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
	}
	if o.output == outputJSON {
		return writeClusterLocksJSON(cmd.OutOrStdout(), all)
	}
	return writeClusterLocksTable(cmd.OutOrStdout(), all, clock())
}

// remoteClusters reads the remote cluster Secrets of namespace ns. Keys
// that cannot be used are returned as warnings.
func remoteClusters(ctx context.Context, client kubernetes.Interface, ns, localID string) ([]multicluster.Cluster, []string) {
	list, err := client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{multicluster.SecretLabel: "true"}).String()})
	if err != nil {
		return nil, []string{fmt.Sprintf("remote clusters not shown: reading the Secrets labelled %s=true: %v", multicluster.SecretLabel, err)}
	}
	var (
		out      []multicluster.Cluster
		warnings []string
		seen     = map[string]string{}
	)
	for i := range list.Items {
		cs, errs := multicluster.Parse(&list.Items[i], localID)
		for _, e := range errs {
			warnings = append(warnings, e.Error())
		}
		for _, c := range cs {
			if first, dup := seen[c.ID]; dup {
				warnings = append(warnings, fmt.Sprintf("cluster %q: also in Secret %s; shown from Secret %s", c.ID, c.Secret, first))
				continue
			}
			seen[c.ID] = c.Secret
			out = append(out, c)
		}
	}
	return out, warnings
}

// remoteLocks lists the locks of namespace ns in cluster c.
func remoteLocks(ctx context.Context, c multicluster.Cluster, ns string) ([]lockstatus.Lock, error) {
	cfg, err := multicluster.RESTConfig(c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = remoteStatusTimeout
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, remoteStatusTimeout)
	defer cancel()
	return lockstatus.List(ctx, client, ns)
}

func writeClusterLocksTable(w io.Writer, all []clusterLocks, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\t"+locksHeader)
	for _, c := range all {
		if len(c.locks) == 0 {
			fmt.Fprintf(tw, "%s\t(no election locks)\n", c.id)
			continue
		}
		writeLockRows(tw, c.id+"\t", c.locks, now)
	}
	return tw.Flush()
}

// clusterLockJSON is a lock of -o json with --clusters.
type clusterLockJSON struct {
	Cluster string `json:"cluster"`
	lockJSON
}

func writeClusterLocksJSON(w io.Writer, all []clusterLocks) error {
	out := []clusterLockJSON{}
	for _, c := range all {
		for _, l := range c.locks {
			out = append(out, clusterLockJSON{Cluster: c.id, lockJSON: lockJSON{Lock: l, LeaseDuration: l.LeaseDuration.String()}})
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}
