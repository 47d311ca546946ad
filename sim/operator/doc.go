// Package operator emulates the parts of gpustack-operator that decide what a
// ModelDeployment becomes, as pure functions: the CRD schema defaults and
// checks plus the validating webhook (Default, Admit), the objects and argv the
// controller renders (RenderRouter, RenderRouterArgs, RenderEngine, the label
// and selector helpers), and the status it publishes from what it observes
// (ComputeStatus). Nothing here runs a process or touches the network; the sim
// target (package sim) drives these functions against its kubelet.
//
// Facts come from docs/operator.md and the operator's own source
// (pkg/worker/webhooks/worker/model_deployment.go,
// pkg/worker/kvcache/router/argv.go,
// pkg/worker/controllers/worker/model_deployment_router.go and
// model_deployment_render.go). Messages are the webhook's, verbatim.
package operator
