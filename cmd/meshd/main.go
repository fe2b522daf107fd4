// Command meshd is the mesh control-plane daemon built on meshd's
// prioritized leader election.
//
//	meshd [run]   contend in the elections and run the controllers (default)
//	meshd status  show every election lock of a namespace
//	meshd env     list the environment variables meshd reads
//	meshd version print the build information
//
// Exit status: 0 on success and after a clean shutdown (SIGTERM or SIGINT),
// 1 on errors, including a shutdown that did not finish in time.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	clientfeatures "k8s.io/client-go/features"
)

func main() {
	clientfeatures.ReplaceFeatureGates(withoutWatchList{clientfeatures.FeatureGates()})
	os.Exit(execute(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// withoutWatchList turns off client-go's streaming list ("watch-list") for
// every informer of the process. Its retry backoff, which grows to 30s while
// the API server is away, is waited out without looking at the stop channel,
// so an informer could outlive its controller's term, and the daemon its
// shutdown bound, by that much. Plain list and watch stop at once.
type withoutWatchList struct{ clientfeatures.Gates }

func (g withoutWatchList) Enabled(f clientfeatures.Feature) bool {
	return f != clientfeatures.WatchListClient && g.Gates.Enabled(f)
}

// execute runs the command line args and returns the exit status.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(withDefaultCommand(root, args))
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "meshd:", err)
		return 1
	}
	return 0
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "meshd",
		Short: "The mesh control-plane daemon with prioritized, multi-revision leader election",
		Long: `meshd runs a mesh control plane's cluster-wide singleton controllers, each
only while this instance leads its election. Elections are compatible with
istiod's: an instance of the default revision takes over from other
revisions, and a local instance from one serving a remote cluster.

Without a command, meshd runs the daemon ("meshd run").`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(newRunCommand(), newStatusCommand(), newEnvCommand(), newVersionCommand())
	return root
}

// withDefaultCommand makes "run" the default command: arguments that start
// with a flag (or no arguments at all) are given to "meshd run", except the
// root's own help flags.
func withDefaultCommand(root *cobra.Command, args []string) []string {
	if len(args) == 0 {
		return []string{"run"}
	}
	first := args[0]
	if first == "-h" || first == "--help" || !strings.HasPrefix(first, "-") {
		return args
	}
	if cmd, _, err := root.Find(args); err == nil && cmd != root {
		return args
	}
	return append([]string{"run"}, args...)
}
