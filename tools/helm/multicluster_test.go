package helm

import (
	"testing"

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
