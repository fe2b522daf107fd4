package daemon

import (
	"fmt"

	"github.com/meshd-io/meshd/internal/controllers"
	"github.com/meshd-io/meshd/internal/controllers/revision"
	"github.com/meshd-io/meshd/internal/controllers/rootcert"
	"github.com/meshd-io/meshd/internal/controllers/status"
)

// BuiltinControllers is the default ControllerFactory, meshd's own
// controllers:
//
//	namespace  rootcert: the mesh root certificate (from the mesh CA's
//	           Secret) in every namespace, skipping those istiod skips; in
//	           a remote cluster, the root of this instance's own cluster
//	status     status: running revisions and election leaders in meshd-status
//	revision   revision: the namespaces of this revision in
//	           meshd-revision-<revision>
func BuiltinControllers(kind Kind, env ControllerEnv) ([]Controller, error) {
	var (
		c   controllers.Controller
		err error
	)
	switch kind {
	case KindNamespace:
		c, err = rootcert.New(env.Client, rootcert.Options{
			MeshNamespace:      env.Namespace,
			SourceClient:       env.SourceClient,
			SelfSignedRoot:     env.SelfSignedRoot,
			ClusterTrustBundle: env.ClusterTrustBundle,
			Recorder:           env.Recorder,
			ExcludedNamespaces: rootcert.IstiodExcludedNamespaces,
			Logger:             env.Logger,
			Registerer:         env.Registerer,
		})
	case KindStatus:
		c, err = status.New(env.Client, status.Options{
			MeshNamespace: env.Namespace,
			Identity:      env.Identity,
			Revision:      env.Revision,
			Logger:        env.Logger,
			Registerer:    env.Registerer,
		})
	case KindRevision:
		c, err = revision.New(env.Client, revision.Options{
			MeshNamespace: env.Namespace,
			Revision:      env.Revision,
			Logger:        env.Logger,
			Registerer:    env.Registerer,
		})
	default:
		return nil, fmt.Errorf("no built-in controllers for %q", kind)
	}
	if err != nil {
		return nil, err
	}
	return []Controller{c}, nil
}
