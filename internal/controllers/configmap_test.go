package controllers

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/election/fence"
)

func term(n int, identity string) context.Context {
	return election.WithTerm(context.Background(),
		election.Term{Lock: "ns/lock", Identity: identity, Transitions: n, Elected: true})
}

func TestApplyFencedConfigMapRefusesAnOlderTerm(t *testing.T) {
	client := kubetest.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other"}})
	get := func() *corev1.ConfigMap {
		t.Helper()
		cm, err := client.CoreV1().ConfigMaps("ns").Get(context.Background(), "cm", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}
	want := func(v string) OwnedConfigMap {
		return OwnedConfigMap{Namespace: "ns", Name: "cm", Data: map[string]string{"k": v}}
	}

	// Term 1 creates the object, stamped.
	if wrote, err := ApplyFencedConfigMap(term(1, "a"), client.CoreV1(), nil, want("a1")); err != nil || !wrote {
		t.Fatalf("create in term 1 = %v, %v", wrote, err)
	}
	old := get()
	if err := fence.Check(old, election.Term{Lock: "ns/lock", Identity: "b", Transitions: 2, Elected: true}); err != nil {
		t.Fatalf("term 2 may not write what term 1 created: %v", err)
	}
	// Someone adds a key; term 2 takes over and writes, keeping it.
	old.Data["keep"] = "me"
	if _, err := client.CoreV1().ConfigMaps("ns").Update(context.Background(), old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if wrote, err := ApplyFencedConfigMap(term(2, "b"), client.CoreV1(), old, want("b2")); err != nil || !wrote {
		t.Fatalf("update in term 2 = %v, %v", wrote, err)
	}
	if cm := get(); cm.Data["k"] != "b2" || cm.Data["keep"] != "me" {
		t.Fatalf("after term 2: %v", cm.Data)
	}

	// Term 1 resumes with its cached copy: refused, with one GET and no write.
	client.ClearActions()
	_, err := ApplyFencedConfigMap(term(1, "a"), client.CoreV1(), old, want("a1-late"))
	if !errors.Is(err, fence.ErrStaleTerm) {
		t.Fatalf("write of term 1 after term 2: err = %v; want a stale term", err)
	}
	if v := kubetest.Verbs(client); !slices.Equal(v, []string{"get configmaps"}) {
		t.Fatalf("a refused write sent %v; want [get configmaps]", v)
	}
	if cm := get(); cm.Data["k"] != "b2" {
		t.Fatalf("term 1 overwrote term 2: %v", cm.Data)
	}
}

func TestApplyFencedConfigMapNeedsATerm(t *testing.T) {
	client := kubetest.NewClientset()
	_, err := ApplyFencedConfigMap(context.Background(), client.CoreV1(), nil,
		OwnedConfigMap{Namespace: "ns", Name: "cm", Data: map[string]string{"k": "v"}})
	if !errors.Is(err, fence.ErrNoTerm) {
		t.Fatalf("err = %v; want fence.ErrNoTerm", err)
	}
	if v := kubetest.Verbs(client); len(v) != 0 {
		t.Fatalf("a write without a term sent %v", v)
	}
}

func TestApplyFencedConfigMapWithElectionDisabled(t *testing.T) {
	client := kubetest.NewClientset()
	ctx := election.WithTerm(context.Background(), election.Term{Lock: "ns/lock", Identity: "a"})
	if wrote, err := ApplyFencedConfigMap(ctx, client.CoreV1(), nil,
		OwnedConfigMap{Namespace: "ns", Name: "cm", Data: map[string]string{"k": "v"}}); err != nil || !wrote {
		t.Fatalf("ApplyFencedConfigMap = %v, %v", wrote, err)
	}
	cm, err := client.CoreV1().ConfigMaps("ns").Get(context.Background(), "cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, stamped := cm.Annotations[fence.Annotation]; stamped {
		t.Fatalf("a write with leader election disabled was stamped: %v", cm.Annotations)
	}
}
