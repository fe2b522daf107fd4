package helm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/tools/helm/render"
)

// renderTyped renders the chart with values and returns its Deployment,
// budget (nil when not rendered) and ServiceAccount.
func renderTyped(t *testing.T, values map[string]any) (*appsv1.Deployment, *policyv1.PodDisruptionBudget, *corev1.ServiceAccount) {
	t.Helper()
	manifest, err := render.Render(chartDir, render.Release{Name: "meshd", Namespace: "mesh", Values: values})
	if err != nil {
		t.Fatal(err)
	}
	var (
		d   *appsv1.Deployment
		pdb *policyv1.PodDisruptionBudget
		sa  *corev1.ServiceAccount
	)
	for _, obj := range objects(t, manifest) {
		switch o := obj.(type) {
		case *appsv1.Deployment:
			d = o
		case *policyv1.PodDisruptionBudget:
			pdb = o
		case *corev1.ServiceAccount:
			sa = o
		}
	}
	if d == nil || sa == nil {
		t.Fatal("no Deployment or ServiceAccount rendered")
	}
	return d, pdb, sa
}

// The budget lets a drain evict an instance with any number of replicas,
// and evict an unready one whatever the budget: it can never block a drain.
func TestDisruptionBudgetNeverBlocksADrain(t *testing.T) {
	for _, replicas := range []int{1, 2, 3} {
		_, pdb, _ := renderTyped(t, map[string]any{"replicas": replicas})
		if pdb == nil {
			t.Fatalf("replicas %d: no PodDisruptionBudget", replicas)
		}
		if pdb.Spec.MinAvailable != nil || pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) {
			t.Errorf("replicas %d: minAvailable %v maxUnavailable %v, want maxUnavailable 1 only", replicas, pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
		}
		if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
			t.Errorf("replicas %d: unhealthyPodEvictionPolicy %v, want AlwaysAllow", replicas, p)
		}
	}
	_, pdb, _ := renderTyped(t, map[string]any{"replicas": 3, "podDisruptionBudget": map[string]any{"minAvailable": 2}})
	if pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != intstr.FromInt32(2) || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("minAvailable 2 of 3: %+v", pdb.Spec)
	}
	if _, pdb, _ := renderTyped(t, map[string]any{"podDisruptionBudget": map[string]any{"enabled": false}}); pdb != nil {
		t.Error("a budget rendered with podDisruptionBudget.enabled false")
	}
}

// Values that would block drains, or that Kubernetes would refuse later,
// are refused at install with the setting named.
func TestChartRejectsBadOperatorValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"minAvailable equal to replicas", map[string]any{"replicas": 2, "podDisruptionBudget": map[string]any{"minAvailable": 2}},
			"minAvailable 2 must be below replicas 2"},
		{"minAvailable 1 of 1", map[string]any{"replicas": 1, "podDisruptionBudget": map[string]any{"minAvailable": 1}},
			"minAvailable 1 must be below replicas 1"},
		{"minAvailable a percentage", map[string]any{"podDisruptionBudget": map[string]any{"minAvailable": "50%"}}, "minAvailable"},
		{"maxUnavailable 0", map[string]any{"podDisruptionBudget": map[string]any{"maxUnavailable": 0}}, "maxUnavailable"},
		{"maxUnavailable 0%", map[string]any{"podDisruptionBudget": map[string]any{"maxUnavailable": "0%"}}, "maxUnavailable"},
		{"unknown budget field", map[string]any{"podDisruptionBudget": map[string]any{"maxUnavaliable": 1}}, "maxUnavaliable"},
		{"pull secret without a name", map[string]any{"imagePullSecrets": []any{map[string]any{"nme": "x"}}}, "imagePullSecrets"},
		{"pull secret as a string", map[string]any{"imagePullSecrets": []any{"regcred"}}, "imagePullSecrets"},
		{"priority class not a string", map[string]any{"priorityClassName": 5}, "priorityClassName"},
		{"annotation not a string", map[string]any{"serviceAccount": map[string]any{"annotations": map[string]any{"a": 1}}}, "annotations"},
		{"scrape interval not a duration", map[string]any{"serviceMonitor": map[string]any{"interval": "often"}}, "interval"},
		{"tolerations not a list", map[string]any{"tolerations": map[string]any{"key": "x"}}, "tolerations"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render.Render(chartDir, render.Release{Name: "meshd", Namespace: "mesh", Values: tc.values})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// The values an operator expects reach the Pod and the ServiceAccount.
func TestOperatorValues(t *testing.T) {
	d, _, sa := renderTyped(t, map[string]any{
		"imagePullSecrets":  []any{map[string]any{"name": "regcred"}},
		"priorityClassName": "system-cluster-critical",
		"serviceAccount":    map[string]any{"annotations": map[string]any{"iam.example.com/role": "meshd"}},
		"nodeSelector":      map[string]any{"kubernetes.io/os": "linux"},
		"tolerations":       []any{map[string]any{"key": "control-plane", "operator": "Exists", "effect": "NoSchedule"}},
		"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{
				"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64", "arm64"}}}}}}}},
		"resources": map[string]any{"requests": map[string]any{"cpu": "100m"}},
		"image":     map[string]any{"repository": "registry.example.com/meshd", "tag": "v1.2.3"},
	})
	spec := d.Spec.Template.Spec
	if len(spec.ImagePullSecrets) != 1 || spec.ImagePullSecrets[0].Name != "regcred" {
		t.Errorf("Pod imagePullSecrets %v", spec.ImagePullSecrets)
	}
	if len(sa.ImagePullSecrets) != 1 || sa.ImagePullSecrets[0].Name != "regcred" {
		t.Errorf("ServiceAccount imagePullSecrets %v", sa.ImagePullSecrets)
	}
	if spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName %q", spec.PriorityClassName)
	}
	if sa.Annotations["iam.example.com/role"] != "meshd" {
		t.Errorf("ServiceAccount annotations %v", sa.Annotations)
	}
	if spec.NodeSelector["kubernetes.io/os"] != "linux" || len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "control-plane" {
		t.Errorf("nodeSelector %v tolerations %v", spec.NodeSelector, spec.Tolerations)
	}
	if a := spec.Affinity; a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Errorf("affinity %+v", a)
	}
	ctr := spec.Containers[0]
	if ctr.Image != "registry.example.com/meshd:v1.2.3" {
		t.Errorf("image %q", ctr.Image)
	}
	if q := ctr.Resources.Requests[corev1.ResourceCPU]; q.String() != "100m" {
		t.Errorf("cpu request %s", q.String())
	}
	// Unset, none of them appears.
	d, _, sa = renderTyped(t, nil)
	if s := d.Spec.Template.Spec; len(s.ImagePullSecrets) != 0 || s.PriorityClassName != "" || s.NodeSelector != nil || s.Affinity != nil {
		t.Errorf("defaults render operator settings: %+v", s)
	}
	if len(sa.Annotations) != 0 || len(sa.ImagePullSecrets) != 0 {
		t.Errorf("defaults annotate the ServiceAccount: %+v", sa)
	}
}

// The chart's default image is the one "make image" builds: the README's
// install lines work with no --set.
func TestDefaultImageIsWhatMakeImageBuilds(t *testing.T) {
	out, err := exec.Command("make", "-s", "-C", repoRoot, "image-name").Output()
	if err != nil {
		t.Fatalf("make image-name: %v", err)
	}
	built := strings.TrimSpace(string(out))
	d, _, _ := renderTyped(t, nil)
	if got := d.Spec.Template.Spec.Containers[0].Image; got != built {
		t.Errorf("the chart runs %q, make image builds %q", got, built)
	}
}

// unstructuredDocs decodes a rendering into plain maps, for kinds the
// client-go scheme does not know (the Prometheus Operator's).
func unstructuredDocs(t *testing.T, manifest []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		out = append(out, m)
	}
}

func kinds(docs []map[string]any) []string {
	var ks []string
	for _, d := range docs {
		ks = append(ks, d["kind"].(string))
	}
	return ks
}

// The Prometheus Operator's objects are off by default and rendered when
// asked for: the ServiceMonitor selects the Service, which selects this
// release's Pods on the monitoring port.
func TestServiceMonitorIsOptIn(t *testing.T) {
	manifest, err := render.Render(chartDir, render.Release{Name: "meshd", Namespace: "mesh"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds(unstructuredDocs(t, manifest)) {
		if k == "ServiceMonitor" || k == "PrometheusRule" || k == "Service" {
			t.Errorf("the defaults render a %s", k)
		}
	}
	manifest, err = render.Render(chartDir, render.Release{Name: "meshd", Namespace: "mesh", Values: map[string]any{
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}}}})
	if err != nil {
		t.Fatal(err)
	}
	var svc, sm map[string]any
	for _, d := range unstructuredDocs(t, manifest) {
		switch d["kind"] {
		case "Service":
			svc = d
		case "ServiceMonitor":
			sm = d
		}
	}
	if svc == nil || sm == nil {
		t.Fatalf("rendered %v, want a Service and a ServiceMonitor", kinds(unstructuredDocs(t, manifest)))
	}
	smSel := sm["spec"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]any)
	svcLabels := svc["metadata"].(map[string]any)["labels"].(map[string]any)
	for k, v := range smSel {
		if svcLabels[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%v, the Service has %v", k, v, svcLabels[k])
		}
	}
	if sm["metadata"].(map[string]any)["labels"].(map[string]any)["release"] != "prom" {
		t.Error("serviceMonitor.labels not on the ServiceMonitor")
	}
	ep := sm["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
	if ep["port"] != "http-monitoring" || ep["path"] != "/metrics" {
		t.Errorf("endpoint %v", ep)
	}
}

// A release cannot change its revision (the Deployment's selector holds
// it): an upgrade that tries is refused before anything is applied, with
// the procedure named, when the chart is rendered against the cluster as
// helm upgrade renders it.
func TestChangingTheRevisionOfAReleaseIsRefused(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	rel := install(t, c, ns, "stable", "racing")
	cfg := c.Config
	_, err := render.Render(chartDir, render.Release{Name: "meshd-stable", Namespace: ns, Cluster: cfg, IsUpgrade: true,
		Values: map[string]any{"revision": "canary"}})
	if err == nil || !strings.Contains(err.Error(), `runs revision "stable"`) || !strings.Contains(err.Error(), "install a new release with revision=canary") {
		t.Fatalf("changing the revision of %s: err = %v", rel.deployment.Name, err)
	}
	// The same upgrade that keeps the revision renders.
	if _, err := render.Render(chartDir, render.Release{Name: "meshd-stable", Namespace: ns, Cluster: cfg, IsUpgrade: true,
		Values: map[string]any{"revision": "stable", "replicas": 3}}); err != nil {
		t.Fatalf("an upgrade keeping the revision: %v", err)
	}
	// And the refused one really would have failed on the API server.
	d := rel.deployment.DeepCopy()
	got, err := c.Client.AppsV1().Deployments(ns).Get(context.Background(), d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.Selector.MatchLabels["meshd.io/revision"] = "canary"
	got.Spec.Template.Labels["meshd.io/revision"] = "canary"
	if _, err := c.Client.AppsV1().Deployments(ns).Update(context.Background(), got, metav1.UpdateOptions{}); err == nil ||
		!strings.Contains(err.Error(), "immutable") {
		t.Fatalf("the API server accepted a new selector: %v", err)
	}
}

// The alerts and the dashboard reach the cluster when asked for, each as
// its file in deploy/charts/meshd/files, unchanged.
func TestAlertsAndDashboardAreOptIn(t *testing.T) {
	manifest, err := render.Render(chartDir, render.Release{Name: "meshd", Namespace: "mesh", Values: map[string]any{
		"prometheusRule":   map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
		"grafanaDashboard": map[string]any{"enabled": true, "namespace": "monitoring"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := os.ReadFile(filepath.Join(chartDir, "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var wantRules map[string]any
	if err := yaml.Unmarshal(alerts, &wantRules); err != nil {
		t.Fatal(err)
	}
	dashboard, err := os.ReadFile(filepath.Join(chartDir, "files", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rule, dash map[string]any
	for _, d := range unstructuredDocs(t, manifest) {
		switch d["kind"] {
		case "PrometheusRule":
			rule = d
		case "ConfigMap":
			dash = d
		}
	}
	if rule == nil || dash == nil {
		t.Fatalf("rendered %v, want a PrometheusRule and a dashboard ConfigMap", kinds(unstructuredDocs(t, manifest)))
	}
	if !reflect.DeepEqual(rule["spec"], wantRules) {
		t.Errorf("the PrometheusRule's spec is not files/alerts.yaml")
	}
	if rule["metadata"].(map[string]any)["labels"].(map[string]any)["release"] != "prom" {
		t.Error("prometheusRule.labels not on the PrometheusRule")
	}
	meta := dash["metadata"].(map[string]any)
	if meta["namespace"] != "monitoring" || meta["labels"].(map[string]any)["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap metadata %v", meta)
	}
	if got := dash["data"].(map[string]any)["meshd.json"]; strings.TrimSpace(got.(string)) != strings.TrimSpace(string(dashboard)) {
		t.Error("the dashboard ConfigMap does not hold files/dashboard.json")
	}
}
