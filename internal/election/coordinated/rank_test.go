package coordinated

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/version"
)

func TestRank(t *testing.T) {
	fresh := t0
	for _, tc := range []struct {
		name  string
		def   string
		cands []cand
		want  []string
	}{
		{"default revision first", "stable",
			[]cand{{name: "c", key: "canary"}, {name: "s", key: "stable"}}, []string{"s", "c"}},
		{"default remote before other local", "stable",
			[]cand{{name: "c", key: "canary"}, {name: "sr", key: "^stable"}}, []string{"sr", "c"}},
		{"local over remote", "stable",
			[]cand{{name: "a", key: "^stable"}, {name: "b", key: "stable"}, {name: "c", key: "canary"}}, []string{"b", "a", "c"}},
		{"local over remote without default", "",
			[]cand{{name: "a", key: "^canary"}, {name: "b", key: "canary"}}, []string{"b", "a"}},
		{"oldest binary version", "stable",
			[]cand{{name: "a", key: "stable", version: "1.10.0"}, {name: "b", key: "stable", version: "1.9.3"}}, []string{"b", "a"}},
		{"unparsable version last", "stable",
			[]cand{{name: "a", key: "stable", version: "bad"}, {name: "b", key: "stable", version: "2.0.0"}}, []string{"b", "a"}},
		{"name breaks ties", "stable",
			[]cand{{name: "z", key: "stable"}, {name: "m", key: "stable"}}, []string{"m", "z"}},
		{"priority before version", "canary",
			[]cand{{name: "s", key: "stable", version: "0.1.0"}, {name: "c", key: "canary", version: "9.0.0"}}, []string{"c", "s"}},
		{"dead candidates dropped", "stable",
			[]cand{{name: "dead", key: "stable", renew: t0.Add(-time.Hour)}, {name: "c", key: "canary"}}, []string{"c"}},
		{"never renewed dropped", "stable",
			[]cand{{name: "new", key: "stable", renew: time.Time{}}, {name: "c", key: "canary"}}, []string{"c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cs []Candidate
			for _, c := range tc.cands {
				if c.renew.IsZero() && c.name != "new" {
					c.renew = fresh
				}
				cs = append(cs, c.candidate(t0))
			}
			var got []string
			for _, m := range members(liveRanked(cs, tc.def)) {
				got = append(got, m.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("ranked %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLiveness(t *testing.T) {
	c := cand{name: "a", key: "stable", renew: t0}
	hb := 2 * leaseDur // announced by no annotation: 2 x lease duration
	for _, tc := range []struct {
		now  time.Time
		live bool
	}{
		{t0, true},
		{t0.Add(LivenessFactor * hb), true},
		{t0.Add(LivenessFactor*hb + time.Millisecond), false},
	} {
		if got := c.candidate(tc.now); got.Live != tc.live || got.Heartbeat != hb {
			t.Errorf("at %v: live %v heartbeat %v, want %v %v", tc.now.Sub(t0), got.Live, got.Heartbeat, tc.live, hb)
		}
	}
	obj := c.object()
	obj.Annotations[HeartbeatAnnotation] = "3"
	if got := candidateFrom(obj, t0.Add(7*time.Second)); got.Live || got.Heartbeat != 3*time.Second {
		t.Errorf("announced heartbeat 3s: live %v heartbeat %v at +7s", got.Live, got.Heartbeat)
	}
	obj.Annotations[LeaseDurationAnnotation] = "nonsense"
	delete(obj.Annotations, HeartbeatAnnotation)
	if got := candidateFrom(obj, t0); got.Live {
		t.Error("a candidate without a lease duration is live")
	}
}

func TestAcked(t *testing.T) {
	for _, tc := range []struct {
		c    cand
		want bool
	}{
		{cand{name: "never pinged", renew: t0}, true},
		{cand{name: "answered", renew: t0, ping: t0}, true},
		{cand{name: "pending", renew: t0, ping: t0.Add(time.Millisecond)}, false},
		{cand{name: "pinged, never renewed", ping: t0}, false},
	} {
		if got := tc.c.candidate(t0).Acked(); got != tc.want {
			t.Errorf("%s: Acked = %v, want %v", tc.c.name, got, tc.want)
		}
	}
}

func TestDefaultBinaryVersion(t *testing.T) {
	v := DefaultBinaryVersion()
	if _, err := version.ParseSemantic(v); err != nil {
		t.Fatalf("DefaultBinaryVersion() = %q: %v", v, err)
	}
}
