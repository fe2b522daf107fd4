package election

// Election IDs used by istiod. A meshd instance that uses the same ID in the
// same namespace competes for the same lock as istiod.
const (
	// IngressController gates Kubernetes Ingress status and sync.
	IngressController = "istio-leader"
	// NamespaceController gates copying the root certificate into namespaces.
	NamespaceController = "istio-namespace-controller-election"
	// ServiceExportController gates the multicluster ServiceExport controller.
	ServiceExportController = "istio-serviceexport-controller-election"
	// GatewayStatusController gates Gateway API status writes.
	GatewayStatusController = "istio-gateway-status-leader"
	// GatewayDeploymentController gates gateway deployments (per revision).
	GatewayDeploymentController = "istio-gateway-deployment"
	// StatusController gates the distribution status of configuration.
	StatusController = "istio-status-leader"
	// AnalyzeController gates in-cluster configuration analysis.
	AnalyzeController = "istio-analyze-leader"
	// NodeUntaintController gates removal of the CNI readiness taint.
	NodeUntaintController = "istio-node-untaint"
	// IPAutoallocateController gates automatic IP allocation for ServiceEntries.
	IPAutoallocateController = "istio-ip-autoallocate"
)
