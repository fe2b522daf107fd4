// Package fence makes writes to Kubernetes objects conditional on an
// election term, so that a leader paused past its lease cannot overwrite the
// work of its successor.
//
// A fenced write stamps the object with the term that wrote it, in the
// annotation Annotation, and is refused with an error wrapping ErrStaleTerm
// when the object carries a later term of the same lock. Update reads, checks,
// changes and writes with optimistic concurrency (resourceVersion): if a
// successor writes in between, the write conflicts and the check runs again
// on the successor's version, so the old term loses.
//
// Guarantees and limits:
//
//   - Only objects written through this package are fenced, and only against
//     terms that have already written them: a stale leader can still write
//     an object its successor has not touched yet.
//   - Terms are ordered by the lock's leaderTransitions (see election.Term).
//     Deleting the lock object restarts that count; objects stamped before
//     then refuse the new, lower terms until their annotation is removed.
//   - A stamp of another lock, or one that cannot be read, is refused rather
//     than overwritten: remove the annotation to let writes through.
//   - With leader election disabled (Term.Elected false) writes are neither
//     checked nor stamped.
package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/pkg/election"
)

// Annotation holds the term that last wrote an object, as JSON:
// {"lock":"<namespace>/<name>","transitions":<n>,"holder":"<identity>"}.
const Annotation = "election.meshd.io/term"

// maxConflicts bounds how often Update retries after a conflict.
const maxConflicts = 5

// ErrNoTerm is returned when the context of a fenced write carries no term:
// it does not come from an election's run function.
var ErrNoTerm = errors.New("fence: the context carries no election term")

// ErrStaleTerm is wrapped by the error of every write a term may not make.
// The error's message names the object, the term the write carried, why it
// was refused and the object's stamp.
var ErrStaleTerm = errors.New("stale election term")

// stamp is the annotation's content.
type stamp struct {
	Lock        string `json:"lock"`
	Transitions int    `json:"transitions"`
	Holder      string `json:"holder"`
}

// Check returns nil when term may write obj: obj carries no stamp, or a stamp
// of the same lock from term or an earlier one. Otherwise it returns an
// error wrapping ErrStaleTerm that says why.
func Check(obj metav1.Object, term election.Term) error {
	raw, ok := obj.GetAnnotations()[Annotation]
	if !ok || !term.Elected {
		return nil
	}
	refuse := func(reason string) error {
		return fmt.Errorf("fence: %s/%s refused to %s: %s (%s=%s): %w", obj.GetNamespace(), obj.GetName(), term, reason, Annotation, raw, ErrStaleTerm)
	}
	var s stamp
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return refuse("the stamp cannot be read: " + err.Error())
	}
	switch {
	case s.Lock != term.Lock:
		return refuse("the object is fenced by another lock")
	case s.Transitions > term.Transitions:
		return refuse("a later term wrote it")
	case s.Transitions == term.Transitions && s.Holder != term.Identity:
		return refuse("another holder wrote it in a term with the same number")
	}
	return nil
}

// Stamp records term in obj's annotations, keeping the others. It does
// nothing for a term of a disabled election.
func Stamp(obj metav1.Object, term election.Term) {
	if !term.Elected {
		return
	}
	raw, _ := json.Marshal(stamp{Lock: term.Lock, Transitions: term.Transitions, Holder: term.Identity}) // cannot fail
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[Annotation] = string(raw)
	obj.SetAnnotations(ann)
}

// Client reads and updates one kind of object; the typed clients of
// client-go, such as client.CoreV1().ConfigMaps(namespace), satisfy it.
type Client[T metav1.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// Update changes the object name with mutate and writes it, fenced by the
// term of ctx (see election.TermFrom): it reads the latest version, refuses
// with an error wrapping ErrStaleTerm if a later term wrote it, applies
// mutate, stamps the term and updates with the version read. On a conflict
// it starts again, up to a few times. An error from mutate is returned as
// is, and nothing is written.
func Update[T metav1.Object](ctx context.Context, c Client[T], name string, mutate func(T) error) (T, error) {
	var zero T
	term, ok := election.TermFrom(ctx)
	if !ok {
		return zero, ErrNoTerm
	}
	var err error
	for range maxConflicts {
		var obj, written T
		if obj, err = c.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return zero, fmt.Errorf("fence: get %s: %w", name, err)
		}
		if err = Check(obj, term); err != nil {
			return zero, err
		}
		if err = mutate(obj); err != nil {
			return zero, err
		}
		Stamp(obj, term)
		written, err = c.Update(ctx, obj, metav1.UpdateOptions{})
		if err == nil {
			return written, nil
		}
		if !apierrors.IsConflict(err) {
			return zero, fmt.Errorf("fence: update %s: %w", name, err)
		}
	}
	return zero, fmt.Errorf("fence: update %s: gave up after %d conflicts: %w", name, maxConflicts, err)
}
