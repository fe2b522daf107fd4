// Package errlist combines several errors into one, the single way meshd
// (its library included) does so: a go-multierror list that prints every
// problem on one line, separated by "; ". errors.Is and errors.As see
// through the result to each error in it, and errors.As with a
// *multierror.Error takes the list apart again.
package errlist

import (
	"strings"

	"github.com/hashicorp/go-multierror"
)

// Join returns the errors of errs that are not nil as one error, or nil if
// there are none. Lists among errs are flattened into the result.
func Join(errs ...error) error {
	var list *multierror.Error
	for _, err := range errs {
		if err != nil {
			list = multierror.Append(list, err)
		}
	}
	if list == nil {
		return nil
	}
	list.ErrorFormat = OneLine
	return list
}

// OneLine formats a list of errors on one line, separated by "; ". It is
// the ErrorFormat of every list Join returns.
func OneLine(list []error) string {
	msgs := make([]string, len(list))
	for i, err := range list {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}
