package resourcelock

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/meshd-io/meshd/internal/ownstack"
)

// ownStackClient makes each Get, Create and Update of a lock on a goroutine
// of its own, which the caller waits for. An API request runs deep (the
// object's encoding, client-go's round trippers, HTTP/2) and a goroutine's
// stack, once grown, stays grown: the runtime halves a stack only while less
// than a quarter of it is in use. Made on an elector's goroutine, which
// lives as long as its election, every request would leave that goroutine
// with a stack sized for the request; on a goroutine of its own, the stack
// goes back to the runtime when the request returns. A process running a
// thousand elections keeps several MiB less this way; a request costs one
// goroutine start more.
//
// The request's results, and a panic, reach the caller as if it had made
// the request itself. List and Watch, which informers call from goroutines
// of their own, are passed through.
type ownStackClient[T kubeObject, L runtime.Object] struct {
	objectClient[T, L]
}

func (c ownStackClient[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	return onOwnStack(func() (T, error) { return c.objectClient.Get(ctx, name, opts) })
}

func (c ownStackClient[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	return onOwnStack(func() (T, error) { return c.objectClient.Create(ctx, obj, opts) })
}

func (c ownStackClient[T, L]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return onOwnStack(func() (T, error) { return c.objectClient.Update(ctx, obj, opts) })
}

// onOwnStack runs request on a goroutine of its own (package ownstack).
func onOwnStack[T any](request func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	r := ownstack.Call(func() result {
		v, err := request()
		return result{v, err}
	})
	return r.v, r.err
}
