package helm

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/meshd-io/meshd/tools/helm/render"
)

// Values the chart refuses, with the reason named, before anything is
// installed.
func TestChartRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"empty revision", map[string]any{"revision": ""}, "revision"},
		{"revision not a DNS label", map[string]any{"revision": "Canary!"}, "revision"},
		{"no replicas", map[string]any{"replicas": 0}, "replicas"},
		{"ttl too short", map[string]any{"ttlSeconds": 0}, "ttlSeconds"},
		{"unknown controller", map[string]any{"controllers": []any{"namespace", "ingress"}}, "controllers"},
		{"no controllers", map[string]any{"controllers": []any{}}, "controllers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render.Render(chartDir, render.Release{Name: "meshd", Namespace: "mesh", Values: tc.values})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// The RBAC shrinks with the controllers: without the namespace controller
// no Secret is readable and nothing is written outside the mesh namespace.
func TestRBACFollowsTheControllers(t *testing.T) {
	for _, tc := range []struct {
		controllers                    []any
		secrets, clusterCMs, clusterNS bool
	}{
		{[]any{"namespace", "status", "revision"}, true, true, true},
		{[]any{"status", "revision"}, false, false, true},
		{[]any{"status"}, false, false, false},
	} {
		manifest, err := render.Render(chartDir, render.Release{Name: "meshd", Namespace: "mesh",
			Values: map[string]any{"controllers": tc.controllers}})
		if err != nil {
			t.Fatal(err)
		}
		var role *rbacv1.Role
		var cr *rbacv1.ClusterRole
		for _, obj := range objects(t, manifest) {
			switch o := obj.(type) {
			case *rbacv1.Role:
				role = o
			case *rbacv1.ClusterRole:
				cr = o
			}
		}
		if role == nil || cr == nil {
			t.Fatalf("controllers %v: no Role or ClusterRole", tc.controllers)
		}
		if got := grants(role.Rules, "secrets"); got != tc.secrets {
			t.Errorf("controllers %v: Role grants Secrets = %v, want %v", tc.controllers, got, tc.secrets)
		}
		if got := grants(cr.Rules, "configmaps"); got != tc.clusterCMs {
			t.Errorf("controllers %v: ClusterRole grants ConfigMaps = %v, want %v", tc.controllers, got, tc.clusterCMs)
		}
		if got := grants(cr.Rules, "namespaces"); got != tc.clusterNS {
			t.Errorf("controllers %v: ClusterRole grants Namespaces = %v, want %v", tc.controllers, got, tc.clusterNS)
		}
		for _, r := range append(role.Rules, cr.Rules...) {
			for _, verb := range r.Verbs {
				if verb == "delete" || verb == "create" || verb == "update" {
					continue // checked below for LeaseCandidates; locks and ConfigMaps need them
				}
				if verb == "deletecollection" || verb == "*" || (verb == "patch" && r.Resources[0] != "events") {
					t.Errorf("controllers %v: rule %v grants %s", tc.controllers, r.Resources, verb)
				}
			}
			if slices.Contains(r.Verbs, "delete") && !slices.Equal(r.Resources, []string{"leasecandidates"}) {
				t.Errorf("controllers %v: rule %v grants delete", tc.controllers, r.Resources)
			}
			if grantsResource(r, "secrets") && len(r.ResourceNames) != 2 {
				t.Errorf("Secrets readable beyond the two CA Secrets: %v", r.ResourceNames)
			}
		}
		if !grants(cr.Rules, "mutatingwebhookconfigurations") || cr.Rules[0].ResourceNames[0] != "istio-revision-tag-default-mesh" {
			t.Errorf("controllers %v: the webhook rule is %+v", tc.controllers, cr.Rules[0])
		}
	}
}

func grants(rules []rbacv1.PolicyRule, resource string) bool {
	for _, r := range rules {
		if grantsResource(r, resource) {
			return true
		}
	}
	return false
}

func grantsResource(r rbacv1.PolicyRule, resource string) bool {
	for _, res := range r.Resources {
		if res == resource {
			return true
		}
	}
	return false
}

// LeaseCandidates are readable in every mode (for "meshd status") and
// writable, deletable included, only in a coordinated mode.
func TestRBACFollowsTheElectionMode(t *testing.T) {
	for _, tc := range []struct {
		mode  string
		verbs []string
	}{
		{"", []string{"get", "list", "watch"}}, // the default: racing
		{"racing", []string{"get", "list", "watch"}},
		{"coordinated", []string{"get", "list", "watch", "create", "update", "delete"}},
		{"oldest-emulation-version", []string{"get", "list", "watch", "create", "update", "delete"}},
	} {
		values := map[string]any{}
		if tc.mode != "" {
			values["electionMode"] = tc.mode
		}
		manifest, err := render.Render(chartDir, render.Release{Name: "meshd", Namespace: "mesh", Values: values})
		if err != nil {
			t.Fatal(err)
		}
		var got [][]string
		var env string
		for _, obj := range objects(t, manifest) {
			switch o := obj.(type) {
			case *rbacv1.Role:
				for _, r := range o.Rules {
					if grantsResource(r, "leasecandidates") {
						got = append(got, r.Verbs)
					}
				}
			case *appsv1.Deployment:
				for _, e := range o.Spec.Template.Spec.Containers[0].Env {
					if e.Name == "LEADER_ELECTION_MODE" {
						env = e.Value
					}
				}
			}
		}
		if len(got) != 1 || !slices.Equal(got[0], tc.verbs) {
			t.Errorf("mode %q: leasecandidates verbs %v, want %v", tc.mode, got, tc.verbs)
		}
		if want := cmp.Or(tc.mode, "racing"); env != want {
			t.Errorf("mode %q: LEADER_ELECTION_MODE=%q, want %q", tc.mode, env, want)
		}
	}
	if _, err := render.Render(chartDir, render.Release{Name: "meshd", Namespace: "mesh",
		Values: map[string]any{"electionMode": "fastest"}}); err == nil || !strings.Contains(err.Error(), "electionMode") {
		t.Fatalf("electionMode fastest: %v", err)
	}
}
