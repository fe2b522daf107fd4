package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/lockstatus"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// Output formats of -o.
const (
	outputTable = "table"
	outputJSON  = "json"
)

type statusOptions struct {
	kube      kubeFlags
	output    string
	clusters  bool
	clusterID string
}

// clock is what "meshd status" measures ages against; tests replace it.
var clock = time.Now

func newStatusCommand() *cobra.Command {
	var (
		o   statusOptions
		env envBindings
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show every election lock in a namespace",
		Long: `Read every leader election lock of a namespace straight from the API server
(ConfigMaps with the leader annotation, and Leases) and show who holds it.
Locks written by istiod and client-go are read too. The default revision
that ranks the prioritized elections follows the table.

RENEWED and EXPIRES IN come from the record's renew time and this machine's
clock, so they are estimates: electors judge expiry on their own clocks. A
holder renewed by its session (--sessions) shows the session's renew time,
marked "(session)"; session Leases themselves are not listed as elections.

A Lease of a coordinated election (--election-mode coordinated) is followed
by a table of its LeaseCandidates, ranked as the coordinator ranks them under
the mesh's default revision (RANK "-" for a candidate that is not live and is
never picked), with the Lease's strategy and preferred holder. HOLDER then
names a candidate, not a meshd identity: the candidate table maps one to the
other. Reading candidates needs list and watch on
leasecandidates.coordination.k8s.io; without them, or on an API server that
does not serve LeaseCandidates, the locks are shown alone.

--clusters also reads the remote clusters of the mesh from the Secrets
labelled istio/multiCluster=true in the namespace (as "meshd run
--multicluster" does) and shows the locks of each cluster, with a CLUSTER
column (a "cluster" field in JSON). A remote cluster that cannot be read is
a warning on stderr; the others are still shown.`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			var c settingsCheck
			c.add(env.apply(cmd.Flags()))
			if o.output != outputTable && o.output != outputJSON {
				c.addf("-o %q: want %s or %s", o.output, outputTable, outputJSON)
			}
			c.dnsLabel("--namespace", o.kube.namespace)
			c.kubeconfig(o.kube.kubeconfig)
			return c.err()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.clusters {
				return runClustersStatus(cmd, o)
			}
			return runStatus(cmd, o)
		},
	}
	o.kube.register(cmd.Flags(), &env)
	o.registerClusters(cmd.Flags(), &env)
	cmd.Flags().StringVarP(&o.output, "output", "o", outputTable, "output format: table or json")
	return cmd
}

// runStatus lists the locks of the namespace and writes them as o asks. An
// empty list is an error when the namespace does not exist.
func runStatus(cmd *cobra.Command, o statusOptions) error {
	client, err := o.kube.client()
	if err != nil {
		return err
	}
	locks, err := lockstatus.List(cmd.Context(), client, o.kube.namespace)
	if err != nil {
		return err
	}
	if len(locks) == 0 {
		if err := namespaceExists(cmd.Context(), client, o.kube.namespace); err != nil {
			return err
		}
	}
	now := clock()
	cands := attachCandidates(cmd, client, o.kube.namespace, locks, now)
	if o.output == outputJSON {
		return writeLocksJSON(cmd.OutOrStdout(), locks)
	}
	if len(locks) == 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "No election locks found in namespace %s.\n", o.kube.namespace)
		return nil
	}
	if err := writeLocksTable(cmd.OutOrStdout(), locks, now); err != nil {
		return err
	}
	writeDefaultRevision(cmd, client, o.kube.namespace)
	if err := writeCandidateTables(cmd.OutOrStdout(), locks, cands.DefaultRevision, now); err != nil {
		return err
	}
	for _, l := range locks {
		if l.Error != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s %s/%s: %s\n", l.Kind, l.Namespace, l.Election, l.Error)
		}
	}
	return nil
}

// writeDefaultRevision prints, after the locks, the default revision that
// ranks the prioritized ones. Failing to read it is a warning on stderr.
func writeDefaultRevision(cmd *cobra.Command, client kubernetes.Interface, ns string) {
	rev, webhook, err := lockstatus.DefaultRevision(cmd.Context(), client, ns)
	switch {
	case err != nil:
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: default revision not shown: %v\n", err)
	case rev == "":
		fmt.Fprintf(cmd.OutOrStdout(), "\nDefault revision: none known (no %s label on MutatingWebhookConfiguration %s): prioritized elections do not preempt across revisions.\n",
			revisions.DefaultRevisionLabel, webhook)
	default:
		fmt.Fprintf(cmd.OutOrStdout(), "\nDefault revision: %s (label %s of MutatingWebhookConfiguration %s).\n",
			rev, revisions.DefaultRevisionLabel, webhook)
	}
}

// attachCandidates gives the Lease locks their LeaseCandidates. Failing to
// read them is a warning on stderr, not an error: the locks are still shown.
func attachCandidates(cmd *cobra.Command, client kubernetes.Interface, ns string, locks []lockstatus.Lock, now time.Time) lockstatus.Candidates {
	cands, err := lockstatus.ListCandidates(cmd.Context(), client, ns, now)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: candidates of coordinated elections not shown: %v\n", err)
	}
	if cands.Warning != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", cands.Warning)
	}
	lockstatus.Attach(locks, cands)
	return cands
}

// namespaceExists returns an error when namespace ns does not exist. A
// caller not allowed to read namespaces gets nil: the locks it could list
// are all it can be told about.
func namespaceExists(ctx context.Context, client kubernetes.Interface, ns string) error {
	_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("namespace %q does not exist (set the mesh namespace with -n or $POD_NAMESPACE)", ns)
	case err != nil && !apierrors.IsForbidden(err):
		return fmt.Errorf("read namespace %q: %w", ns, err)
	}
	return nil
}

// writeLocksTable prints one row per lock, times relative to now.
func writeLocksTable(w io.Writer, locks []lockstatus.Lock, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, locksHeader)
	writeLockRows(tw, "", locks, now)
	return tw.Flush()
}

const locksHeader = "ELECTION\tLOCK\tHOLDER\tKEY\tREVISION\tREMOTE\tRENEWED\tEXPIRES IN\tTRANSITIONS"

// writeLockRows prints one row per lock, each after prefix.
func writeLockRows(tw io.Writer, prefix string, locks []lockstatus.Lock, now time.Time) {
	for _, l := range locks {
		holder, renewed, expires := orDash(l.Holder), "-", "-"
		if l.Error != "" {
			holder = "<invalid record>"
		}
		if !l.RenewTime.IsZero() {
			renewed = duration.HumanDuration(now.Sub(l.RenewTime)) + " ago"
		}
		if l.Session != "" && l.SessionRenewTime.After(l.RenewTime) {
			renewed = duration.HumanDuration(now.Sub(l.SessionRenewTime)) + " ago (session)"
		}
		if l.Held() {
			if left := l.ExpiresIn(now); left > 0 {
				expires = duration.HumanDuration(left)
			} else {
				expires = "expired"
			}
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\t%t\t%s\t%s\t%d\n", prefix, l.Election, l.Kind, holder, orDash(l.HolderKey),
			orDash(l.Revision), l.Remote, renewed, expires, l.Transitions)
	}
}

// writeCandidateTables prints, after the table of locks, one table per Lease
// that has LeaseCandidates: its strategy and preferred holder, then its
// candidates ranked as the coordinator ranks them under defaultRevision.
func writeCandidateTables(w io.Writer, locks []lockstatus.Lock, defaultRevision string, now time.Time) error {
	for _, l := range locks {
		if len(l.Candidates) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nCandidates of Lease %s (strategy %s, preferred holder %s, default revision %s):\n",
			l.Election, orDash(l.Strategy), orDash(l.PreferredHolder), orDash(defaultRevision))
		tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
		fmt.Fprintln(tw, "RANK\tCANDIDATE\tIDENTITY\tREVISION\tREMOTE\tVERSION\tHEARTBEAT\tLIVE\tROLE")
		for _, c := range l.Candidates {
			rank, beat := "-", "-"
			if c.Rank > 0 {
				rank = strconv.Itoa(c.Rank)
			}
			if !c.RenewTime.IsZero() {
				beat = duration.HumanDuration(now.Sub(c.RenewTime)) + " ago"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\t%s\t%s\t%t\t%s\n", rank, c.Name, orDash(c.Identity), orDash(c.Revision),
				c.Remote, orDash(c.BinaryVersion), beat, c.Live, candidateRole(l, c.Name))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// candidateRole says whether the candidate holds the lock or is the one a
// coordinator wants to hold it.
func candidateRole(l lockstatus.Lock, name string) string {
	switch name {
	case l.Holder:
		return "holder"
	case l.PreferredHolder:
		return "preferred"
	}
	return "-"
}

// lockJSON is a lock as -o json prints it: lockstatus.Lock with the lease
// duration as a Go duration string ("30s") instead of nanoseconds.
type lockJSON struct {
	lockstatus.Lock
	LeaseDuration string `json:"leaseDuration"`
}

func writeLocksJSON(w io.Writer, locks []lockstatus.Lock) error {
	out := make([]lockJSON, len(locks))
	for i, l := range locks {
		out[i] = lockJSON{Lock: l, LeaseDuration: l.LeaseDuration.String()}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
