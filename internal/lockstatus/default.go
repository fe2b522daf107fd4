package lockstatus

import (
	"context"

	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/pkg/revisions"
)

// DefaultRevision reads the mesh's default revision as the daemon does by
// default: the istio.io/rev label of the webhook configuration named by
// revisions.DefaultWebhookName(namespace), returned with that name. A
// missing webhook or label gives "" and no error: no default is known.
func DefaultRevision(ctx context.Context, client kubernetes.Interface, namespace string) (revision, webhook string, err error) {
	revision, err = defaultRevision(ctx, client, namespace)
	return revision, revisions.DefaultWebhookName(namespace), err
}
