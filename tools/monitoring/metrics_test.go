package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/meshd-io/meshd/internal/testing/meshdproc"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
)

var dashboardFile = filepath.Join(repoRoot, "deploy", "charts", "meshd", "files", "dashboard.json")

func ruleGroups(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.ParseFile(alertsFile, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if errs != nil {
		t.Fatalf("%s: %v", alertsFile, errs)
	}
	return groups
}

func alertNames(t *testing.T) []string {
	var names []string
	for _, g := range ruleGroups(t).Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
		}
	}
	return names
}

// queries returns every PromQL expression meshd ships, by where it is: the
// alerts and the dashboard's targets, with the dashboard's variables
// replaced by values PromQL accepts.
func queries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, g := range ruleGroups(t).Groups {
		for _, r := range g.Rules {
			out["alert "+r.Alert] = r.Expr
		}
	}
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$revision", ".*")
	n := 0
	for _, p := range dash.Panels {
		for i, tg := range p.Targets {
			out[fmt.Sprintf("panel %q query %d", p.Title, i)] = vars.Replace(tg.Expr)
			n++
		}
	}
	for _, v := range dash.Templating.List {
		if m := regexp.MustCompile(`^label_values\((\w+),`).FindStringSubmatch(v.Definition); m != nil {
			out["variable "+v.Name] = m[1]
		}
	}
	if n == 0 {
		t.Fatal("the dashboard has no queries")
	}
	return out
}

// seriesNames returns the metric names expr selects.
func seriesNames(t *testing.T, where, expr string) []string {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Fatalf("%s: %v\n%s", where, err, expr)
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			names = append(names, vs.Name)
		}
		return nil
	})
	if len(names) == 0 {
		t.Errorf("%s selects no series: %s", where, expr)
	}
	return names
}

// families parses the metric families of a text exposition, each with
// the names of its series (a histogram's _bucket, _sum and _count).
func families(exposition string) map[string][]string {
	out := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`).FindAllStringSubmatch(exposition, -1) {
		name, typ := m[1], m[2]
		out[name] = []string{name}
		if typ == "histogram" || typ == "summary" {
			out[name] = append(out[name], name+"_sum", name+"_count")
			if typ == "histogram" {
				out[name] = append(out[name], name+"_bucket")
			}
		}
	}
	return out
}

// A meshd run against a real API server, in coordinated mode (so that the
// coordinator's series exist too), scraped once every family of interest
// has appeared. It is built stamped as make build stamps it.
func scrapeMeshd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "meshd")
	const version = "v9.9.9-test"
	build := exec.Command("go", "build", "-o", bin, "-ldflags",
		"-X github.com/meshd-io/meshd/internal/monitoring.buildVersion="+version, "./cmd/meshd")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build meshd: %v\n%s", err, out)
	}
	c, err := testcluster.Start(testcluster.Options{APIServerFlags: []string{
		"--feature-gates=CoordinatedLeaderElection=true", "--runtime-config=coordination.k8s.io/v1beta1=true"}})
	if err != nil {
		t.Fatalf("start a control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	ctx := context.Background()
	ns := "mesh"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	webhook := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{
		Name: "istio-revision-tag-default-" + ns, Labels: map[string]string{"istio.io/rev": "stable"}}}
	if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, webhook, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	p, err := meshdproc.Start(meshdproc.Options{Binary: bin, Name: "meshd-0", Kubeconfig: kubeconfig, Namespace: ns,
		Revision: "stable", TTL: 4 * time.Second, SelfSignedRoot: true, LogDir: t.TempDir(),
		Env: []string{"LEADER_ELECTION_MODE=coordinated"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(10 * time.Second) })
	waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := p.WaitReady(waitCtx); err != nil {
		t.Fatalf("meshd not ready: %v\n%s", err, p.LogTail(30))
	}
	var text string
	deadline := time.Now().Add(30 * time.Second)
	for {
		text, err = p.Metrics(ctx)
		if err == nil && strings.Contains(text, "meshd_coordinator_decisions_total{") && strings.Contains(text, "rest_client_requests_total{") &&
			strings.Contains(text, "meshd_election_holder_info{") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed every family (%v):\n%s", err, text)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(text, `version="`+version+`"`) {
		t.Errorf("meshd_build_info does not carry the stamped version %s", version)
	}
	return text
}

// Every query of the dashboard and the alerts names a series that a
// running meshd exports, and docs/metrics.md lists exactly the families
// meshd exports (beyond Go's and the process's).
func TestQueriesAndDocsMatchWhatMeshdExports(t *testing.T) {
	exported := map[string]bool{}
	fams := families(scrapeMeshd(t))
	for _, series := range fams {
		for _, s := range series {
			exported[s] = true
		}
	}
	for where, expr := range queries(t) {
		for _, name := range seriesNames(t, where, expr) {
			if !exported[name] {
				t.Errorf("%s uses %s, which meshd does not export", where, name)
			}
		}
	}

	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`((?:meshd|leader_election|rest_client)_[a-z_]+)`").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	var missing []string
	for name := range fams {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_") {
			continue
		}
		if !documented[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/metrics.md does not list %v", missing)
	}
	for name := range documented {
		if !exported[name] {
			t.Errorf("docs/metrics.md lists %s, which meshd does not export", name)
		}
	}
}
