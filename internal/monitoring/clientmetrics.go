package monitoring

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// Series of client-go's REST client, with the names Kubernetes components
// use, so that existing dashboards of API request latency and errors work.
var (
	requestLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_request_duration_seconds",
		Help:    "Latency of API server requests made by this process, by verb and host.",
		Buckets: []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60},
	}, []string{"verb", "host"})
	requestResults = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_requests_total",
		Help: "API server requests made by this process, by HTTP status code (\"<error>\" when no response came), method and host.",
	}, []string{"code", "method", "host"})

	hookOnce sync.Once
)

// RegisterClientMetrics makes client-go report the latency and the result of
// every API request of the process, and registers those series with reg.
// client-go takes one set of hooks per process: the series are shared by
// every registry this is called with. Calling it again with the same
// registry is harmless.
func RegisterClientMetrics(reg prometheus.Registerer) error {
	hookOnce.Do(func() {
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestLatency: latencyHook{},
			RequestResult:  resultHook{},
		})
	})
	for _, c := range []prometheus.Collector{requestLatency, requestResults} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return err
			}
		}
	}
	return nil
}

type latencyHook struct{}

func (latencyHook) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	requestLatency.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
}

type resultHook struct{}

func (resultHook) Increment(_ context.Context, code, method, host string) {
	requestResults.WithLabelValues(code, method, host).Inc()
}
