// Package render renders meshd's Helm chart with Helm's own Go library, as
// "helm template" would, into one multi-document YAML in install order.
package render

import (
	"bytes"
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/client-go/rest"
)

// Release names one installation of the chart.
type Release struct {
	Name      string
	Namespace string
	// Values override the chart's values.yaml, as "helm --set" or "-f" do.
	Values map[string]any
	// Cluster, if set, is the API server that the chart's lookup function
	// reads, as "helm install" and "helm upgrade" do; IsUpgrade renders an
	// upgrade of an installed release. Without Cluster, lookup finds
	// nothing, as in "helm template".
	Cluster   *rest.Config
	IsUpgrade bool
}

// Render renders the chart in chartDir for rel and returns its manifests,
// ordered as Helm installs them (ServiceAccount, RBAC, then workloads), each
// document headed by a "# Source:" comment. It fails on a template error or
// on values the chart rejects.
func Render(chartDir string, rel Release) ([]byte, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", chartDir, err)
	}
	vals, err := chartutil.ToRenderValues(ch, rel.Values, chartutil.ReleaseOptions{
		Name: rel.Name, Namespace: rel.Namespace, Revision: 1, IsInstall: !rel.IsUpgrade, IsUpgrade: rel.IsUpgrade,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	var files map[string]string
	if rel.Cluster != nil {
		files, err = engine.RenderWithClient(ch, vals, rel.Cluster)
	} else {
		files, err = engine.Render(ch, vals)
	}
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	// Only manifests: helpers and notes render to nothing useful here.
	for name := range files {
		if !strings.HasSuffix(name, ".yaml") || strings.TrimSpace(files[name]) == "" {
			delete(files, name)
		}
	}
	_, manifests, err := releaseutil.SortManifests(files, chartutil.VersionSet{"v1"}, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("sort manifests: %w", err)
	}
	var out bytes.Buffer
	for _, m := range manifests {
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", m.Name, strings.TrimSpace(m.Content))
	}
	return out.Bytes(), nil
}
