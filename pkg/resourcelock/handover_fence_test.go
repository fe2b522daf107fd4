package resourcelock

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

// A record write naming a candidate carries on the fence of the answer
// that accepted that candidate's request, when the request honours fences,
// and nothing else of the request; every other write drops the fence.
func TestRecordNamingTheAcceptedCandidateCarriesItsFence(t *testing.T) {
	accepted := lockmeta.Handover{Holder: "h", Candidate: "c", CandidateKey: "k", Answer: lockmeta.AnswerAccepted, HonoursFence: true, FenceMillis: 1500}
	cases := []struct {
		name   string
		before lockmeta.Handover
		holder string
		want   lockmeta.Handover
	}{
		{"the accepted candidate is named", accepted, "c", lockmeta.Handover{Holder: "c", FenceMillis: 1500}},
		{"another candidate is named", accepted, "x", lockmeta.Handover{Holder: "x"}},
		{"released", accepted, "", lockmeta.Handover{}},
		{"the request does not honour fences", func() lockmeta.Handover { h := accepted; h.HonoursFence = false; return h }(), "c", lockmeta.Handover{Holder: "c"}},
		{"the request is not accepted", func() lockmeta.Handover { h := accepted; h.Answer = ""; return h }(), "c", lockmeta.Handover{Holder: "c"}},
		{"the named holder renews", lockmeta.Handover{Holder: "c", FenceMillis: 1500}, "c", lockmeta.Handover{Holder: "c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			meta := &metav1.ObjectMeta{Annotations: map[string]string{"other": "kept"}}
			lockmeta.WriteHandover(meta, tc.before)
			said := Config{Cooperative: true}.advertise(meta, lockmeta.ReadHandover(meta.Annotations), Record{HolderIdentity: tc.holder})
			if got := lockmeta.ReadHandover(meta.Annotations); got != tc.want || said != tc.want {
				t.Fatalf("annotation after the write %+v (advertise said %+v), want %+v", got, said, tc.want)
			}
			if meta.Annotations["other"] != "kept" {
				t.Fatalf("another annotation was lost: %v", meta.Annotations)
			}
		})
	}
}
