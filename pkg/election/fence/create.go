package fence

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/meshd-io/meshd/pkg/election"
)

// CreateClient is a Client that also creates objects; the typed clients of
// client-go satisfy it.
type CreateClient[T metav1.Object] interface {
	Client[T]
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
}

// Object is what CreateOrUpdate writes: a Kubernetes object it can copy.
type Object interface {
	metav1.Object
	runtime.Object
}

// CreateOrUpdate writes the object named like template, fenced by the term
// of ctx, whether or not it exists yet. A missing object is built from a
// copy of template, changed with mutate, stamped with the term and created;
// an existing one, or one that someone else creates meanwhile, is written
// as Update writes it: refused with an error wrapping ErrStaleTerm if a
// later term wrote it, else changed with mutate and stamped. It reports
// whether it created the object. template itself is never changed.
//
// A stale leader can still create an object its successor has not written
// yet (the package's first limit); it cannot replace one that exists.
func CreateOrUpdate[T Object](ctx context.Context, c CreateClient[T], template T, mutate func(T) error) (T, bool, error) {
	var zero T
	term, ok := election.TermFrom(ctx)
	if !ok {
		return zero, false, ErrNoTerm
	}
	name := template.GetName()
	if name == "" {
		return zero, false, fmt.Errorf("fence: the object to create has no name")
	}
	for range maxConflicts {
		_, err := c.Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			written, err := Update(ctx, c, name, mutate)
			return written, false, err
		case !apierrors.IsNotFound(err):
			return zero, false, fmt.Errorf("fence: get %s: %w", name, err)
		}
		obj, ok := template.DeepCopyObject().(T)
		if !ok {
			return zero, false, fmt.Errorf("fence: %T does not copy to itself", template)
		}
		if err := mutate(obj); err != nil {
			return zero, false, err
		}
		Stamp(obj, term)
		created, err := c.Create(ctx, obj, metav1.CreateOptions{})
		if err == nil {
			return created, true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return zero, false, fmt.Errorf("fence: create %s: %w", name, err)
		}
		// Created meanwhile, perhaps by a successor: write it fenced.
	}
	return zero, false, fmt.Errorf("fence: create %s: it kept appearing and disappearing %d times", name, maxConflicts)
}
