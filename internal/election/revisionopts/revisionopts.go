// Package revisionopts checks where a default-revision watcher looks: the
// mesh namespace, the webhook and its label. Package revisions checks its
// Options with it when it builds a watcher, and the watches elections share
// (package defaultwatch) check theirs with it before they join one, so that
// both report the same problems in the same words.
package revisionopts

import (
	"fmt"
	"strings"

	"github.com/hashicorp/go-multierror"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Validate reports every invalid one of the given fields of
// revisions.Options, their defaults already filled in, at once.
func Validate(meshNamespace, webhookName, revisionLabel string) error {
	var errs *multierror.Error
	check := func(field, value string, problems []string) {
		if len(problems) > 0 {
			errs = multierror.Append(errs, fmt.Errorf("invalid Options.%s %q: %s", field, value, strings.Join(problems, "; ")))
		}
	}
	check("MeshNamespace", meshNamespace, validation.IsDNS1123Label(meshNamespace))
	check("WebhookName", webhookName, validation.IsDNS1123Subdomain(webhookName))
	check("RevisionLabel", revisionLabel, validation.IsQualifiedName(revisionLabel))
	return errs.ErrorOrNil()
}
