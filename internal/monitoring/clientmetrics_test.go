package monitoring

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Requests made with client-go show up by verb and by status code, in every
// registry the series were registered with.
func TestClientMetrics(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/missing") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
			return
		}
		w.WriteHeader(http.StatusForbidden)
	}))
	defer api.Close()
	a, b := prometheus.NewRegistry(), prometheus.NewRegistry()
	for _, reg := range []prometheus.Registerer{a, b, a} {
		if err := RegisterClientMetrics(reg); err != nil {
			t.Fatal(err)
		}
	}
	client, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _ = client.CoreV1().ConfigMaps("ns").Get(ctx, "missing", metav1.GetOptions{})
	_ = client.CoreV1().ConfigMaps("ns").Delete(ctx, "x", metav1.DeleteOptions{})

	host := strings.TrimPrefix(api.URL, "http://")
	for name, reg := range map[string]*prometheus.Registry{"a": a, "b": b} {
		srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		var body strings.Builder
		_, _ = io.Copy(&body, resp.Body)
		resp.Body.Close()
		srv.Close()
		for _, want := range []string{
			`rest_client_requests_total{code="404",host="` + host + `",method="GET"} 1`,
			`rest_client_requests_total{code="403",host="` + host + `",method="DELETE"} 1`,
			`rest_client_request_duration_seconds_count{host="` + host + `",verb="GET"} 1`,
			`rest_client_request_duration_seconds_count{host="` + host + `",verb="DELETE"} 1`,
		} {
			if !strings.Contains(body.String(), want) {
				t.Errorf("registry %s lacks %s:\n%s", name, want, body.String())
			}
		}
	}
}
