package monitoring

import (
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Set by the build (make build, make image) with -ldflags "-X
// github.com/meshd-io/meshd/internal/monitoring.buildVersion=... -X
// ...buildCommit=...", as main.version and main.commit are. Unset, the
// module version and the commit the go command recorded are used.
var (
	buildVersion string
	buildCommit  string
)

// stateCollector derives series from the Source at each scrape: what the
// process is, whether it is ready, and what each election looks like from
// here. They complement the counters of the elections and controllers with
// the state that alerts and dashboards join on:
//
//	meshd_build_info{version,commit,go_version}          1
//	meshd_ready{revision}                                 1 ready, 0 not
//	meshd_default_revision_info{revision,default_revision}
//	                                                      1 while this process knows a default revision
//	meshd_election_holder_info{name,revision,cluster,holder,holder_key}
//	                                                      1 per election whose lock names a holder
//	meshd_election_failing{name,revision,cluster}         1 while the latest acquire or renew failed
//	meshd_election_session_fallback{name,revision,cluster} 1 while renewing without its session
//	meshd_election_problems{name,revision,cluster}        reasons the election's work is not done
//
// cluster is the cluster whose API server holds the lock (empty when the
// process follows one cluster only): with remote clusters, one election
// ID and revision exists once per cluster.
type stateCollector struct {
	src     Source
	version string
	commit  string

	buildInfo, ready, defaultRev, holder, failing, fallback, problems *prometheus.Desc
}

func newStateCollector(src Source) *stateCollector {
	version, commit := buildVersion, buildCommit
	if info, ok := debug.ReadBuildInfo(); ok {
		if version == "" {
			version = info.Main.Version
		}
		if commit == "" {
			for _, s := range info.Settings {
				if s.Key == "vcs.revision" {
					commit = s.Value
				}
			}
		}
	}
	if version == "" {
		version = "(devel)"
	}
	return &stateCollector{
		src: src, version: version, commit: commit,
		buildInfo: prometheus.NewDesc("meshd_build_info",
			"Always 1; the labels say which build of meshd this process runs.", []string{"version", "commit", "go_version"}, nil),
		ready: prometheus.NewDesc("meshd_ready",
			"1 while the process answers /readyz with 200, else 0.", []string{"revision"}, nil),
		defaultRev: prometheus.NewDesc("meshd_default_revision_info",
			"1 while this process knows the mesh's default revision, which ranks the candidates of prioritized elections.",
			[]string{"revision", "default_revision"}, nil),
		holder: prometheus.NewDesc("meshd_election_holder_info",
			"1 for each election whose lock names a holder, as this process last saw the lock; holder_key is the holder's revision (^ for a remote one).",
			[]string{"name", "revision", "cluster", "holder", "holder_key"}, nil),
		failing: prometheus.NewDesc("meshd_election_failing",
			"1 while the latest attempt of this process to acquire or renew the election's lock failed (lastError in /debug/elections), else 0.",
			[]string{"name", "revision", "cluster"}, nil),
		fallback: prometheus.NewDesc("meshd_election_session_fallback",
			"1 while this process renews its record itself although it has a session, because it saw a holder without sessions.",
			[]string{"name", "revision", "cluster"}, nil),
		problems: prometheus.NewDesc("meshd_election_problems",
			"Reasons the work this election gates is not being done in this process (for example no mesh root certificate); 0 when none.",
			[]string{"name", "revision", "cluster"}, nil),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.buildInfo, c.ready, c.defaultRev, c.holder, c.failing, c.fallback, c.problems} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.buildInfo, prometheus.GaugeValue, 1, c.version, c.commit, strings.TrimPrefix(runtime.Version(), "go"))
	elections := c.src.Elections()
	if len(elections) > 0 {
		ready := 1.0
		if c.src.Ready() != nil {
			ready = 0
		}
		ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, ready, elections[0].Revision)
	}
	for _, e := range elections {
		if e.DefaultRevision != "" {
			ch <- prometheus.MustNewConstMetric(c.defaultRev, prometheus.GaugeValue, 1, elections[0].Revision, e.DefaultRevision)
			break
		}
	}
	for _, e := range elections {
		if e.Holder != "" {
			ch <- prometheus.MustNewConstMetric(c.holder, prometheus.GaugeValue, 1, e.Name, e.Revision, e.Cluster, e.Holder, e.HolderKey)
		}
		ch <- prometheus.MustNewConstMetric(c.failing, prometheus.GaugeValue, flag(e.LastError != ""), e.Name, e.Revision, e.Cluster)
		fallback := flag(e.SessionFallback)
		ch <- prometheus.MustNewConstMetric(c.fallback, prometheus.GaugeValue, fallback, e.Name, e.Revision, e.Cluster)
		ch <- prometheus.MustNewConstMetric(c.problems, prometheus.GaugeValue, float64(len(e.Problems)), e.Name, e.Revision, e.Cluster)
	}
}

func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
