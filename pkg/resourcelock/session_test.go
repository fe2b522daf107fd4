package resourcelock

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

// The mark written with a record names the session only for this lock's
// own holder, keeps every other annotation, and goes with a release.
func TestSessionMarkFollowsTheRecord(t *testing.T) {
	l := &objectLock[*metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList]{cfg: Config{Identity: "a"}}
	meta := &metav1.ObjectMeta{Annotations: map[string]string{"other": "x"}}
	l.markSession(meta, Record{HolderIdentity: "a"})
	if _, ok := meta.Annotations[lockmeta.SessionAnnotationKey]; ok {
		t.Fatal("a lock whose SetSession was never called wrote a mark")
	}
	l.SetSession(lockmeta.SessionMark{Holder: "ignored", Session: "s/1", Process: "s/1"})
	for _, c := range []struct {
		holder string
		want   *lockmeta.SessionMark
	}{
		{"a", &lockmeta.SessionMark{Holder: "a", Session: "s/1", Process: "s/1"}},
		{"b", &lockmeta.SessionMark{Holder: "b"}},
		{"", nil},
	} {
		l.markSession(meta, Record{HolderIdentity: c.holder})
		got, ok := lockmeta.ReadSessionMark(meta.Annotations)
		if meta.Annotations["other"] != "x" {
			t.Fatalf("holder %q: a foreign annotation was lost", c.holder)
		}
		if (c.want == nil) != !ok || (c.want != nil && got != *c.want) {
			t.Errorf("holder %q: mark %+v (present %v), want %+v", c.holder, got, ok, c.want)
		}
	}
	l.SetSession(lockmeta.SessionMark{Mixed: true, Process: "s/1"})
	l.markSession(meta, Record{HolderIdentity: "a"})
	if got, _ := lockmeta.ReadSessionMark(meta.Annotations); got != (lockmeta.SessionMark{Holder: "a", Mixed: true, Process: "s/1"}) {
		t.Errorf("a holder that fell back wrote %+v", got)
	}
}

// Any annotation value decodes to a mark or to none, never a panic, and a
// mark decoded survives encoding again.
func FuzzReadSessionMark(f *testing.F) {
	for _, s := range []string{`{"holder":"a","session":"s/1"}`, `{"holder":"a","mixed":true}`, `{"holder":"a","process":"s/2"}`, `{}`, `{"holder":""}`, `null`, `[`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		m, ok := lockmeta.ReadSessionMark(map[string]string{lockmeta.SessionAnnotationKey: raw})
		if !ok {
			return
		}
		if m.Holder == "" {
			t.Fatalf("a mark without a holder was accepted: %q", raw)
		}
		again, _ := json.Marshal(m)
		if m2, ok := lockmeta.ReadSessionMark(map[string]string{lockmeta.SessionAnnotationKey: string(again)}); !ok || m2 != m {
			t.Fatalf("mark %+v did not survive encoding: %s", m, again)
		}
	})
}
