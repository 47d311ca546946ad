package sim

import "net/http"

// InClusterClient is the HTTP client the sim hands its in-cluster programs
// (the EPP's): <svc>.<ns>.svc names resolve as kube-proxy and cluster DNS
// would (resolveService).
func InClusterClient(c *Cluster) *http.Client { return c.serviceClient() }
