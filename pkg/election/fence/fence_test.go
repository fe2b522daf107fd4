package fence

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/election"
)

const ns = "istio-system"

func term(transitions int, holder string) election.Term {
	return election.Term{Lock: ns + "/istio-leader", Identity: holder, Transitions: transitions, Elected: true}
}

func TestCheck(t *testing.T) {
	stamped := func(raw string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work", Annotations: map[string]string{Annotation: raw}}}
	}
	cases := []struct {
		name   string
		obj    *corev1.ConfigMap
		term   election.Term
		reason string // "" means allowed
	}{
		{"unstamped", &corev1.ConfigMap{}, term(3, "a"), ""},
		{"same term", stamped(`{"lock":"istio-system/istio-leader","transitions":3,"holder":"a"}`), term(3, "a"), ""},
		{"earlier term", stamped(`{"lock":"istio-system/istio-leader","transitions":2,"holder":"b"}`), term(3, "a"), ""},
		{"later term", stamped(`{"lock":"istio-system/istio-leader","transitions":4,"holder":"b"}`), term(3, "a"), "a later term wrote it"},
		{"same number, other holder", stamped(`{"lock":"istio-system/istio-leader","transitions":3,"holder":"b"}`), term(3, "a"), "same number"},
		{"other lock", stamped(`{"lock":"istio-system/other","transitions":1,"holder":"a"}`), term(3, "a"), "another lock"},
		{"corrupt", stamped(`{"lock":`), term(3, "a"), "cannot be read"},
		{"disabled election", stamped(`{"lock":"istio-system/istio-leader","transitions":9,"holder":"b"}`), election.Term{Lock: ns + "/istio-leader"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.obj, tc.term)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrStaleTerm) || !strings.Contains(err.Error(), tc.reason) || !strings.Contains(err.Error(), tc.obj.Name) {
				t.Fatalf("Check = %v, want ErrStaleTerm naming the object and saying %q", err, tc.reason)
			}
		})
	}
}

func newWork(t *testing.T) (context.Context, *corev1.ConfigMap) {
	t.Helper()
	return context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work", Annotations: map[string]string{"keep": "me"}},
		Data:       map[string]string{"owner": "nobody"},
	}
}

func setOwner(owner string) func(*corev1.ConfigMap) error {
	return func(cm *corev1.ConfigMap) error { cm.Data["owner"] = owner; return nil }
}

func TestUpdateStampsAndRefusesAnOlderTerm(t *testing.T) {
	ctx, cm := newWork(t)
	client := kubetest.NewClientset(cm)
	cms := client.CoreV1().ConfigMaps(ns)

	if _, err := Update(ctx, cms, "work", setOwner("x")); !errors.Is(err, ErrNoTerm) {
		t.Fatalf("without a term: %v, want ErrNoTerm", err)
	}
	newer := election.WithTerm(ctx, term(5, "b"))
	got, err := Update(newer, cms, "work", setOwner("b"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations[Annotation] != `{"lock":"istio-system/istio-leader","transitions":5,"holder":"b"}` || got.Annotations["keep"] != "me" {
		t.Fatalf("annotations after the write: %v", got.Annotations)
	}
	client.ClearActions()
	older := election.WithTerm(ctx, term(4, "a"))
	_, err = Update(older, cms, "work", setOwner("a"))
	if !errors.Is(err, ErrStaleTerm) {
		t.Fatalf("older term: %v, want ErrStaleTerm", err)
	}
	if verbs := kubetest.Verbs(client); strings.Join(verbs, ",") != "get configmaps" {
		t.Fatalf("older term made %v, want only a get", verbs)
	}
	if now, _ := cms.Get(ctx, "work", metav1.GetOptions{}); now.Data["owner"] != "b" {
		t.Fatalf("owner = %q after a refused write", now.Data["owner"])
	}
}

// TestUpdateRechecksAfterAConflict: a successor writes between the stale
// leader's read and its update. The update conflicts, the retry reads the
// successor's stamp, and the stale write is refused.
func TestUpdateRechecksAfterAConflict(t *testing.T) {
	ctx, cm := newWork(t)
	client := kubetest.NewClientset(cm)
	cms := client.CoreV1().ConfigMaps(ns)
	successor := func() {
		if _, err := Update(election.WithTerm(ctx, term(2, "b")), cms, "work", setOwner("b")); err != nil {
			t.Errorf("successor's write: %v", err)
		}
	}
	_, err := Update(election.WithTerm(ctx, term(1, "a")), &interleaving{Client: cms, before: successor}, "work", setOwner("a"))
	if !errors.Is(err, ErrStaleTerm) {
		t.Fatalf("stale write after a conflict: %v, want ErrStaleTerm", err)
	}
	if now, _ := cms.Get(ctx, "work", metav1.GetOptions{}); now.Data["owner"] != "b" {
		t.Fatalf("owner = %q, want the successor's b", now.Data["owner"])
	}
}

// interleaving runs before once, just before the first update it forwards.
type interleaving struct {
	Client[*corev1.ConfigMap]
	before func()
}

func (c *interleaving) Update(ctx context.Context, obj *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error) {
	if c.before != nil {
		c.before()
		c.before = nil
	}
	return c.Client.Update(ctx, obj, opts)
}

func TestUpdateWithMutateErrorWritesNothing(t *testing.T) {
	ctx, cm := newWork(t)
	client := kubetest.NewClientset(cm)
	boom := errors.New("boom")
	_, err := Update(election.WithTerm(ctx, term(1, "a")), client.CoreV1().ConfigMaps(ns), "work",
		func(*corev1.ConfigMap) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	for _, v := range kubetest.Verbs(client) {
		if v != "get configmaps" {
			t.Fatalf("verbs %v, want only gets", kubetest.Verbs(client))
		}
	}
}
