package fence

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/election"
)

func workTemplate() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work", Labels: map[string]string{"app": "x"}},
		Data: map[string]string{}}
}

// A missing object is created stamped; an existing one is updated fenced,
// and refused to an older term; the template is never changed.
func TestCreateOrUpdate(t *testing.T) {
	ctx := context.Background()
	client := kubetest.NewClientset()
	cms := client.CoreV1().ConfigMaps(ns)
	tmpl := workTemplate()

	got, created, err := CreateOrUpdate(election.WithTerm(ctx, term(4, "a")), cms, tmpl, setOwner("a"))
	if err != nil || !created {
		t.Fatalf("create: %v, created %v", err, created)
	}
	if got.Data["owner"] != "a" || got.Labels["app"] != "x" || !strings.Contains(got.Annotations[Annotation], `"transitions":4`) {
		t.Errorf("created %+v", got)
	}
	if len(tmpl.Data) != 0 || tmpl.Annotations != nil {
		t.Errorf("the template changed: %+v", tmpl)
	}

	got, created, err = CreateOrUpdate(election.WithTerm(ctx, term(5, "b")), cms, tmpl, setOwner("b"))
	if err != nil || created || got.Data["owner"] != "b" {
		t.Fatalf("update by a later term: %v, created %v, %+v", err, created, got)
	}
	_, _, err = CreateOrUpdate(election.WithTerm(ctx, term(4, "a")), cms, tmpl, setOwner("a"))
	if !errors.Is(err, ErrStaleTerm) {
		t.Fatalf("an older term: %v, want ErrStaleTerm", err)
	}
	if cm, _ := cms.Get(ctx, "work", metav1.GetOptions{}); cm.Data["owner"] != "b" {
		t.Errorf("the older term overwrote the object: %+v", cm.Data)
	}

	if _, _, err := CreateOrUpdate(ctx, cms, tmpl, setOwner("c")); !errors.Is(err, ErrNoTerm) {
		t.Errorf("no term: %v", err)
	}
	if _, _, err := CreateOrUpdate(election.WithTerm(ctx, term(6, "c")), cms, &corev1.ConfigMap{}, setOwner("c")); err == nil ||
		!strings.Contains(err.Error(), "no name") {
		t.Errorf("no name: %v", err)
	}
	failing := errors.New("cannot build it")
	if _, _, err := CreateOrUpdate(election.WithTerm(ctx, term(6, "c")), client.CoreV1().ConfigMaps("other"), tmpl,
		func(*corev1.ConfigMap) error { return failing }); !errors.Is(err, failing) {
		t.Errorf("mutate's error: %v", err)
	}
	if _, err := client.CoreV1().ConfigMaps("other").Get(ctx, "work", metav1.GetOptions{}); err == nil {
		t.Error("an object was created although mutate failed")
	}
}

// racingCreate lets a successor create the object between the read that
// finds it missing and the create.
type racingCreate struct {
	corev1client.ConfigMapInterface
	successor func()
	done      bool
}

func (r *racingCreate) Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error) {
	if !r.done {
		r.done = true
		r.successor()
	}
	return r.ConfigMapInterface.Create(ctx, cm, opts)
}

// A stale leader that finds the object missing and loses the race to
// create it to its successor does not overwrite the successor's object.
func TestCreateOrUpdateLosesTheRaceToASuccessor(t *testing.T) {
	ctx := context.Background()
	client := kubetest.NewClientset()
	cms := client.CoreV1().ConfigMaps(ns)
	successor := func() {
		if _, _, err := CreateOrUpdate(election.WithTerm(ctx, term(8, "b")), cms, workTemplate(), setOwner("b")); err != nil {
			t.Errorf("successor: %v", err)
		}
	}
	_, _, err := CreateOrUpdate(election.WithTerm(ctx, term(7, "a")), &racingCreate{ConfigMapInterface: cms, successor: successor},
		workTemplate(), setOwner("a"))
	if !errors.Is(err, ErrStaleTerm) {
		t.Fatalf("the stale leader: %v, want ErrStaleTerm", err)
	}
	if cm, _ := cms.Get(ctx, "work", metav1.GetOptions{}); cm.Data["owner"] != "b" {
		t.Errorf("the successor's object was overwritten: %+v", cm.Data)
	}
}
