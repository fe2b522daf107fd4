// Package kubetest holds helpers for unit tests against the fake clientset.
package kubetest

import (
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// NewClientset returns a fake clientset that, unlike the plain one, behaves
// like the API server for optimistic concurrency: every create and update
// sets a new metadata.resourceVersion, and an update whose resourceVersion is
// not the stored one fails with a Conflict error.
func NewClientset(objects ...runtime.Object) *fake.Clientset {
	return enforceResourceVersion(fake.NewClientset(objects...))
}

// NewUnmanagedClientset is NewClientset without the field management of
// server-side apply, which makes every write of the fake build a REST mapper
// (milliseconds each). Simulations that write thousands of times use it; it
// does not support Apply.
func NewUnmanagedClientset(objects ...runtime.Object) *fake.Clientset {
	//lint:ignore SA1019 the managed tracker is what this function avoids
	return enforceResourceVersion(fake.NewSimpleClientset(objects...)) //nolint:staticcheck // see above
}

func enforceResourceVersion(c *fake.Clientset) *fake.Clientset {
	var mu sync.Mutex
	next := 1000
	bump := func(obj runtime.Object) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return
		}
		next++
		m.SetResourceVersion(strconv.Itoa(next))
	}
	c.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		bump(a.(k8stesting.CreateAction).GetObject())
		return false, nil, nil
	})
	c.PrependReactor("update", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		obj := a.(k8stesting.UpdateAction).GetObject()
		m, err := meta.Accessor(obj)
		if err != nil {
			return false, nil, nil
		}
		stored, err := c.Tracker().Get(a.GetResource(), a.GetNamespace(), m.GetName())
		if err != nil {
			return false, nil, nil // let the tracker report NotFound
		}
		sm, err := meta.Accessor(stored)
		if err != nil {
			return false, nil, nil
		}
		if m.GetResourceVersion() != sm.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), m.GetName(),
				errStale{have: m.GetResourceVersion(), want: sm.GetResourceVersion()})
		}
		bump(obj)
		return false, nil, nil
	})
	return c
}

type errStale struct{ have, want string }

func (e errStale) Error() string {
	return "the object has been modified: resourceVersion " + e.have + " is stale, current is " + e.want
}

// Verbs lists "verb resource" for every action the clientset has recorded,
// skipping list and watch calls.
func Verbs(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	return out
}
