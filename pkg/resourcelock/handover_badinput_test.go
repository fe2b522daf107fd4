package resourcelock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

// badHandovers are handover annotations that are not a handover: each reads
// as none, so a candidate treats the holder as one that cannot answer.
var badHandovers = []string{
	``,
	`not json`,
	`["holder"]`,
	`"stable-1"`,
	`{"holder":7}`,
	`{"holder":"a","candidate":["b"]}`,
	`{"holder":"a","requestTime":"yesterday"}`,
	`{"holder":"a"} trailing`,
	`{"holder":"` + strings.Repeat("a", 300<<10) + `"`,
}

func TestBadHandoverAnnotationsReadAsNone(t *testing.T) {
	for _, raw := range badHandovers {
		name := raw
		if len(name) > 30 {
			name = name[:30]
		}
		t.Run(name, func(t *testing.T) {
			if h := lockmeta.ReadHandover(map[string]string{lockmeta.HandoverAnnotationKey: raw}); h != (lockmeta.Handover{}) {
				t.Fatalf("readHandover = %+v, want none", h)
			}
			for _, cooperative := range []bool{false, true} {
				client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
					Name: testName, Namespace: testNamespace,
					Annotations: map[string]string{lockmeta.HandoverAnnotationKey: raw},
				}})
				l, err := NewConfigMapLock(client.CoreV1(), testNamespace, testName, Config{Identity: "me", Cooperative: cooperative})
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := l.Get(context.Background()); err != nil {
					t.Fatalf("Get: %v", err)
				}
				if h := l.Handover(); h != (lockmeta.Handover{}) {
					t.Fatalf("Handover = %+v, want none", h)
				}
				if err := l.Update(context.Background(), Record{HolderIdentity: "me", LeaseDurationSeconds: 4}); err != nil {
					t.Fatalf("Update: %v", err)
				}
				cm, _ := client.CoreV1().ConfigMaps(testNamespace).Get(context.Background(), testName, metav1.GetOptions{})
				got := cm.Annotations[lockmeta.HandoverAnnotationKey]
				switch {
				case cooperative && got != `{"holder":"me"}`:
					t.Fatalf("cooperative write left %.40q, want the new holder advertised", got)
				case !cooperative && got != raw:
					t.Fatalf("a lock that does not cooperate changed the annotation to %.40q", got)
				}
			}
		})
	}
}

// FuzzReadHandover: no annotation panics the decoder, and what decodes is
// written back (writeHandover) as an annotation that reads the same.
func FuzzReadHandover(f *testing.F) {
	for _, raw := range badHandovers[:8] {
		f.Add(raw)
	}
	f.Add(`{"holder":"stable-1"}`)
	f.Add(`{"holder":"stable-1","candidate":"canary-2","candidateKey":"canary","requestTime":"2026-01-02T03:04:05Z"}`)
	f.Add(`{"holder":"a","requestTime":null}`)
	f.Fuzz(func(t *testing.T, raw string) {
		h := lockmeta.ReadHandover(map[string]string{lockmeta.HandoverAnnotationKey: raw})
		if h.RequestTime != nil {
			// The wire format has second precision.
			h.RequestTime = &metav1.Time{Time: h.RequestTime.Truncate(time.Second)}
			if y := h.RequestTime.UTC().Year(); y < 0 || y > 9999 {
				return // not writable as RFC 3339; the decoder only reads it
			}
		}
		var meta metav1.ObjectMeta
		lockmeta.WriteHandover(&meta, h)
		if h == (lockmeta.Handover{}) {
			if _, ok := meta.Annotations[lockmeta.HandoverAnnotationKey]; ok {
				t.Fatal("an empty handover was written")
			}
			return
		}
		again := lockmeta.ReadHandover(meta.Annotations)
		if again.Holder != h.Holder || again.Candidate != h.Candidate || again.CandidateKey != h.CandidateKey ||
			(again.RequestTime == nil) != (h.RequestTime == nil) ||
			(h.RequestTime != nil && !again.RequestTime.Equal(h.RequestTime)) {
			t.Fatalf("%q read %+v, written and read again %+v", raw, h, again)
		}
	})
}

// FuzzLockAnnotations feeds arbitrary record and handover annotations to
// both locks the way a watch delivers objects: nothing panics, a record that
// does not decode is reported as corrupt together with its bytes, and one
// that does re-encodes to what Peek returns.
func FuzzLockAnnotations(f *testing.F) {
	f.Add(`{"holderIdentity":"a","holderKey":"stable","leaseDurationSeconds":30}`, `{"holder":"a"}`, "stable", int32(30))
	f.Add(`not json`, `not json`, "^^", int32(-1))
	f.Add(``, ``, "", int32(0))
	f.Fuzz(func(t *testing.T, record, handover, key string, lease int32) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: testName, Namespace: testNamespace, ResourceVersion: "7",
			Annotations: map[string]string{LeaderAnnotationKey: record, lockmeta.HandoverAnnotationKey: handover},
		}}
		cl, err := NewConfigMapLock(fake.NewClientset().CoreV1(), testNamespace, testName, Config{Identity: "me"})
		if err != nil {
			t.Fatal(err)
		}
		rec, raw, err := cl.Observe(cm, false)
		switch {
		case err != nil:
			if !errors.Is(err, ErrCorruptRecord) || rec != nil || string(raw) != record {
				t.Fatalf("Observe(%q) = %v, %q, %v; want a corrupt-record error with the raw bytes", record, rec, raw, err)
			}
		case string(raw) != record:
			t.Fatalf("raw = %q, want %q", raw, record)
		}
		_ = cl.Handover()

		holder := "h"
		lc := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: testName, Namespace: testNamespace, ResourceVersion: "7",
				Annotations: map[string]string{LeaseHolderKeyAnnotation: key, lockmeta.HandoverAnnotationKey: handover}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &lease},
		}
		ll, err := NewLeaseLock(fake.NewClientset().CoordinationV1(), testNamespace, testName, Config{Identity: "me"})
		if err != nil {
			t.Fatal(err)
		}
		rec, raw, err = ll.Observe(lc, false)
		if err != nil || rec.HolderKey != key || rec.LeaseDurationSeconds != int(lease) || string(raw) != string(EncodeRecord(*rec)) {
			t.Fatalf("Lease Observe = %+v, %q, %v", rec, raw, err)
		}
		_ = ll.Handover()
	})
}
