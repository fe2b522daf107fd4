package errlist

import (
	"errors"
	"testing"

	"github.com/hashicorp/go-multierror"
)

func TestJoin(t *testing.T) {
	a, b, c := errors.New("a"), errors.New("b"), errors.New("c")
	if err := Join(nil, nil); err != nil {
		t.Fatalf("Join(nil, nil) = %v; want nil", err)
	}
	err := Join(a, nil, Join(b, c))
	if got, want := err.Error(), "a; b; c"; got != want {
		t.Fatalf("Join = %q; want %q", got, want)
	}
	var list *multierror.Error
	if !errors.As(err, &list) || len(list.Errors) != 3 {
		t.Fatalf("Join did not flatten into a list of 3: %#v", err)
	}
	for _, e := range []error{a, b, c} {
		if !errors.Is(err, e) {
			t.Errorf("errors.Is(Join, %v) = false", e)
		}
	}
}
