// Package router holds the sim's emulations of the argv routers, grouped by
// what each part imitates:
//
//	vllmrouter/          vllm-router v0.1.15: flags, routes, routing text, PD, metrics
//	sglanggateway/       sgl-model-gateway gateway-v0.3.1: the same, its own way
//	policy/, tree/       the routing policies of both (per router flavour) and
//	                     the cache-aware radix tree
//	internal/rust/       the Rust runtime both are built on: clap (argv
//	                     parsing, help and error text, exit 2), debug
//	                     (std::fmt::Debug forms in the banners), tracing
//	                     (tracing-subscriber's log lines)
//	internal/httpx       HTTP plumbing: the axum stack's guards, extractor
//	                     rejections and answers, reqwest's worker client and
//	                     the streaming relay, the request-id layer
//	internal/cli         the flags both routers share (one clap command each)
//	internal/discovery   service_discovery.rs: the Kubernetes Pod watch
//	internal/workers     the worker registry, health checks and circuit breaker
//	internal/routerbase  the process base both share by descent: lifecycle,
//	                     serving and shutdown, the metrics exporter, retries,
//	                     the operator's /observer/endpoints patch
//	internal/routertest  loopback engines, a Pod watcher and a runner for tests
//
// A router's own behaviour (its routes, error shapes, the text it routes by,
// metric names, log sites) stays in its package, so each reads as that router.
package router
