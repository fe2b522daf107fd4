package helm

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/meshd-io/meshd/tools/helm/render"
)

// multicluster: true lets meshd read the remote clusters' kubeconfig
// Secrets (every Secret of the namespace, since a Role cannot select by
// label, and only reading); without it, only the two CA Secrets by name.
func TestRBACMulticlusterReadsSecrets(t *testing.T) {
	for _, multi := range []bool{false, true} {
		manifest, err := render.Render(chartDir, render.Release{Name: "meshd", Namespace: "mesh",
			Values: map[string]any{"multicluster": multi}})
		if err != nil {
			t.Fatal(err)
		}
		var role *rbacv1.Role
		for _, obj := range objects(t, manifest) {
			if r, ok := obj.(*rbacv1.Role); ok {
				role = r
			}
		}
		if role == nil {
			t.Fatal("no Role")
		}
		var allSecrets bool
		for _, r := range role.Rules {
			if grantsResource(r, "secrets") && len(r.ResourceNames) == 0 {
				allSecrets = true
				for _, v := range r.Verbs {
					if v != "get" && v != "list" && v != "watch" {
						t.Errorf("multicluster %v: Secrets rule grants %s", multi, v)
					}
				}
			}
		}
		if allSecrets != multi {
			t.Errorf("multicluster %v: every Secret readable = %v", multi, allSecrets)
		}
	}
}

// multicluster and clusterId reach meshd through its environment, as
// istiod's CLUSTER_ID does; without them neither variable is set.
func TestMulticlusterValuesReachTheDeployment(t *testing.T) {
	for _, c := range []struct {
		values    map[string]any
		multi, id string
	}{
		{map[string]any{}, "", ""},
		{map[string]any{"multicluster": true, "clusterId": "east"}, "true", "east"},
	} {
		manifest, err := render.Render(chartDir, render.Release{Name: "meshd", Namespace: "mesh", Values: c.values})
		if err != nil {
			t.Fatal(err)
		}
		env := map[string]string{}
		for _, obj := range objects(t, manifest) {
			if d, ok := obj.(*appsv1.Deployment); ok {
				for _, e := range d.Spec.Template.Spec.Containers[0].Env {
					env[e.Name] = e.Value
				}
			}
		}
		if env["ENABLE_MULTICLUSTER"] != c.multi || env["CLUSTER_ID"] != c.id {
			t.Errorf("values %v: ENABLE_MULTICLUSTER %q, CLUSTER_ID %q; want %q, %q", c.values, env["ENABLE_MULTICLUSTER"], env["CLUSTER_ID"], c.multi, c.id)
		}
	}
}
