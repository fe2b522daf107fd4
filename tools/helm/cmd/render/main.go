// Command render writes meshd's chart rendered with its default values
// (release "meshd" in istio-system) to a file: deploy/meshd.yaml, for
// "kubectl apply -f" without Helm. "make chart" runs it; a test fails when
// the file is stale.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/meshd-io/meshd/tools/helm/render"
)

// Header heads the rendered file.
const Header = `# meshd, rendered from deploy/charts/meshd with its default values
# (release "meshd", namespace istio-system, revision "default") by "make chart".
# Do not edit: change the chart and run "make chart". With Helm:
#   helm install meshd deploy/charts/meshd -n istio-system
`

// Default is the release deploy/meshd.yaml is rendered for.
var Default = render.Release{Name: "meshd", Namespace: "istio-system"}

func main() {
	chart := flag.String("chart", "deploy/charts/meshd", "chart directory")
	out := flag.String("o", "deploy/meshd.yaml", "output file")
	flag.Parse()
	b, err := render.Render(*chart, Default)
	if err == nil {
		err = os.WriteFile(*out, append([]byte(Header), b...), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}
