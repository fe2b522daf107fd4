package revisions

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestOddWebhookLabelsAreReadVerbatim: the watcher reports the label value
// as it is, without trimming or lowercasing; a value that names no revision
// (revisions are lowercase DNS labels) entitles nobody to steal. A missing
// label, an empty value, or the revision under another key all mean that no
// default is known.
func TestOddWebhookLabelsAreReadVerbatim(t *testing.T) {
	name := DefaultWebhookName("")
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"no labels", nil, ""},
		{"empty value", map[string]string{DefaultRevisionLabel: ""}, ""},
		{"other key", map[string]string{"istio.io/revision": "stable", "app": "istiod"}, ""},
		{"upper case", map[string]string{DefaultRevisionLabel: "STABLE"}, "STABLE"},
		{"dots and underscores", map[string]string{DefaultRevisionLabel: "1.2_3-x"}, "1.2_3-x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(&admissionregistrationv1.MutatingWebhookConfiguration{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: tc.labels},
			})
			w, err := NewDefaultWatcher(client, Options{})
			if err != nil {
				t.Fatal(err)
			}
			start(t, w)
			if got := w.GetDefault(); got != tc.want {
				t.Fatalf("GetDefault = %q, want %q", got, tc.want)
			}
		})
	}
}
