package multicluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// ShouldJoin decides whether an external control plane in cluster localID
// may run a remote cluster's controllers: only when the remote's mesh
// namespace exists and its ControlPlaneClustersAnnotation lists localID or
// "*". It retries other errors with backoff (up to 30s apart) until ctx
// ends, and then returns ctx's error. The reason says what was decided and
// why, for the log.
func ShouldJoin(ctx context.Context, remote kubernetes.Interface, namespace, localID string) (join bool, reason string, err error) {
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: 30 * time.Second}
	var last error
	err = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		ns, err := remote.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			reason = fmt.Sprintf("the remote cluster has no namespace %s", namespace)
			return true, nil
		case err != nil:
			last = err
			return false, nil
		}
		value, ok := ns.Annotations[ControlPlaneClustersAnnotation]
		if !ok {
			reason = fmt.Sprintf("namespace %s of the remote cluster has no %s annotation", namespace, ControlPlaneClustersAnnotation)
			return true, nil
		}
		for _, c := range strings.Split(value, ",") {
			if c = strings.TrimSpace(c); c == "*" || c == localID {
				join = true
				reason = fmt.Sprintf("%s=%q on namespace %s of the remote cluster names this cluster", ControlPlaneClustersAnnotation, value, namespace)
				return true, nil
			}
		}
		reason = fmt.Sprintf("%s=%q on namespace %s of the remote cluster does not name cluster %q", ControlPlaneClustersAnnotation, value, namespace, localID)
		return true, nil
	})
	if err != nil {
		if last != nil {
			err = fmt.Errorf("%w (last error: %v)", err, last)
		}
		return false, "", err
	}
	return join, reason, nil
}
