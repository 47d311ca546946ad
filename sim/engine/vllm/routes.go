package vllm

import "github.com/gpustack/routing-conformance/sim/engine/internal/routes"

// Routes is vLLM 0.29.0's OpenAI server (`vllm serve` of a generative
// model), route by route in the order its app registers them
// (launchers/app.py build_app -> launchers/api_server/routers.py
// register_api_routers), and which the sim serves. Starlette answers a
// path no route matches 404 {"detail":"Not Found"} and a path whose routes
// take other methods 405 {"detail":"Method Not Allowed"}: vLLM's
// http_exception_handler is registered for FastAPI's HTTPException, while
// the router raises Starlette's, which keeps FastAPI's default handler.
var Routes = routes.Table{
	Engine: "vLLM 0.29.0",
	Repo:   "vllm-project/vllm",
	Ref:    "98dff2a81",
	Read:   "the vllm 0.29.0 wheel on PyPI, whose vllm/_version.py records commit g98dff2a81",
	Routes: []routes.Route{
		// FastAPI's own documentation routes (FastAPI.setup).
		{Path: "/openapi.json", Methods: []string{"GET"}, When: "not --disable-fastapi-docs", OnByDefault: true, Source: "vllm/entrypoints/launchers/app.py"},
		{Path: "/docs", Methods: []string{"GET"}, When: "not --disable-fastapi-docs", OnByDefault: true, Source: "vllm/entrypoints/launchers/app.py"},
		{Path: "/docs/oauth2-redirect", Methods: []string{"GET"}, When: "not --disable-fastapi-docs", OnByDefault: true, Source: "vllm/entrypoints/launchers/app.py"},
		{Path: "/redoc", Methods: []string{"GET"}, When: "not --disable-fastapi-docs (and not --enable-offline-docs)", OnByDefault: true, Source: "vllm/entrypoints/launchers/app.py"},
		// Instrumentator.
		{Path: "/load", Methods: []string{"GET"}, Served: true, Use: "clients (server_load with --enable-server-load-tracking)", Source: "vllm/entrypoints/serve/instrumentator/basic.py"},
		{Path: "/version", Methods: []string{"GET"}, Served: true, Use: "clients", Source: "vllm/entrypoints/serve/instrumentator/basic.py"},
		{Path: "/health", Methods: []string{"GET"}, Served: true, Use: "operator probes, vllm-router health checks, the suite", Source: "vllm/entrypoints/serve/instrumentator/health.py"},
		{Path: "/metrics", Methods: []string{"GET"}, Served: true, Use: "EPP, operator snapshot, suite (Instrumentator.expose)", Source: "vllm/entrypoints/serve/instrumentator/metrics.py"},
		{Path: "/metrics", Mount: true, Served: true, Use: "any other method or suffix (prometheus_client's ASGI app)", Source: "vllm/entrypoints/serve/instrumentator/metrics.py"},
		// LoRA, profiling, tokenizer.
		{Path: "/v1/load_lora_adapter", Methods: []string{"POST"}, When: "VLLM_ALLOW_RUNTIME_LORA_UPDATING", Source: "vllm/entrypoints/serve/lora/api_router.py"},
		{Path: "/v1/unload_lora_adapter", Methods: []string{"POST"}, When: "VLLM_ALLOW_RUNTIME_LORA_UPDATING", Source: "vllm/entrypoints/serve/lora/api_router.py"},
		{Path: "/start_profile", Methods: []string{"POST"}, When: "--profiler-config with a profiler", Source: "vllm/entrypoints/serve/profile/api_router.py"},
		{Path: "/stop_profile", Methods: []string{"POST"}, When: "--profiler-config with a profiler", Source: "vllm/entrypoints/serve/profile/api_router.py"},
		{Path: "/tokenize", Methods: []string{"POST"}, Served: true, Use: "clients, EPP tokenizers", Source: "vllm/entrypoints/serve/tokenize/api_router.py"},
		{Path: "/detokenize", Methods: []string{"POST"}, Use: "clients (the sim's hashed token ids cannot be decoded)", Source: "vllm/entrypoints/serve/tokenize/api_router.py"},
		{Path: "/tokenizer_info", Methods: []string{"GET"}, When: "--enable-tokenizer-info-endpoint", Source: "vllm/entrypoints/serve/tokenize/api_router.py"},
		// Models, SageMaker.
		{Path: "/v1/models", Methods: []string{"GET"}, Served: true, Use: "vllm-router, operator probes through llm-d's proxy, clients", Source: "vllm/entrypoints/openai/models/api_router.py"},
		{Path: "/ping", Methods: []string{"POST", "GET"}, Served: true, Use: "SageMaker-style health checks (same answer as /health)", Source: "vllm/entrypoints/serve/sagemaker/api_router.py"},
		{Path: "/invocations", Methods: []string{"POST"}, Source: "vllm/entrypoints/serve/sagemaker/api_router.py"},
		// Development mode.
		{Path: "/reset_prefix_cache", Methods: []string{"POST"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/cache/api_router.py"},
		{Path: "/reset_mm_cache", Methods: []string{"POST"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/cache/api_router.py"},
		{Path: "/reset_encoder_cache", Methods: []string{"POST"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/cache/api_router.py"},
		{Path: "/pause", Methods: []string{"POST"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/rlhf/api_router.py"},
		{Path: "/resume", Methods: []string{"POST"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/rlhf/api_router.py"},
		{Path: "/abort_requests", Methods: []string{"POST"}, When: "VLLM_SERVER_DEV_MODE, or --tokens-only", Source: "vllm/entrypoints/serve/dev/rlhf/api_router.py"},
		{Path: "/is_paused", Methods: []string{"GET"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/rlhf/api_router.py"},
		{Path: "/init_weight_transfer_engine", Methods: []string{"POST"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/rlhf/api_router.py"},
		{Path: "/start_weight_update", Methods: []string{"POST"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/rlhf/api_router.py"},
		{Path: "/start_draft_weight_update", Methods: []string{"POST"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/rlhf/api_router.py"},
		{Path: "/update_weights", Methods: []string{"POST"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/rlhf/api_router.py"},
		{Path: "/finish_weight_update", Methods: []string{"POST"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/rlhf/api_router.py"},
		{Path: "/update_weight_version", Methods: []string{"POST"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/rlhf/api_router.py"},
		{Path: "/weight_info", Methods: []string{"GET"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/rlhf/api_router.py"},
		{Path: "/get_world_size", Methods: []string{"GET"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/rlhf/api_router.py"},
		{Path: "/collective_rpc", Methods: []string{"POST"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/rpc/api_router.py"},
		{Path: "/server_info", Methods: []string{"GET"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/server_info/api_router.py"},
		{Path: "/sleep", Methods: []string{"POST"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/sleep/api_router.py"},
		{Path: "/wake_up", Methods: []string{"POST"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/sleep/api_router.py"},
		{Path: "/is_sleeping", Methods: []string{"GET"}, When: "VLLM_SERVER_DEV_MODE", Source: "vllm/entrypoints/serve/dev/sleep/api_router.py"},
		// Generation.
		{Path: "/v1/chat/completions", Methods: []string{"POST"}, Served: true, Use: "every router, the EPP, the suite", Source: "vllm/entrypoints/openai/chat_completion/api_router.py"},
		{Path: "/v1/chat/completions/batch", Methods: []string{"POST"}, Source: "vllm/entrypoints/openai/chat_completion/api_router.py"},
		{Path: "/v1/responses", Methods: []string{"POST"}, Source: "vllm/entrypoints/openai/responses/api_router.py"},
		{Path: "/v1/responses/{response_id}", Methods: []string{"GET"}, Source: "vllm/entrypoints/openai/responses/api_router.py"},
		{Path: "/v1/responses/{response_id}/cancel", Methods: []string{"POST"}, Source: "vllm/entrypoints/openai/responses/api_router.py"},
		{Path: "/v1/completions", Methods: []string{"POST"}, Served: true, Use: "every router, the EPP, the suite", Source: "vllm/entrypoints/openai/completion/api_router.py"},
		{Path: "/v1/messages", Methods: []string{"POST"}, Source: "vllm/entrypoints/anthropic/api_router.py"},
		{Path: "/v1/messages/count_tokens", Methods: []string{"POST"}, Source: "vllm/entrypoints/anthropic/api_router.py"},
		{Path: "/cohere/v2/chat", Methods: []string{"POST"}, When: "VLLM_ENABLE_COHERE_API and the cohere SDK", Source: "vllm/entrypoints/cohere/api_router.py"},
		{Path: "/cohere/v2/chat/render", Methods: []string{"POST"}, When: "VLLM_ENABLE_COHERE_API and the cohere SDK", Source: "vllm/entrypoints/cohere/api_router.py"},
		{Path: "/generative_scoring", Methods: []string{"POST"}, Source: "vllm/entrypoints/generate/generative_scoring/api_router.py"},
		{Path: "/scale_elastic_ep", Methods: []string{"POST"}, Source: "vllm/entrypoints/serve/elastic_ep/api_router.py"},
		{Path: "/is_scaling_elastic_ep", Methods: []string{"POST"}, Source: "vllm/entrypoints/serve/elastic_ep/api_router.py"},
		// Scale-out: render, derender, tokens in/out.
		{Path: renderChatPath, Methods: []string{"POST"}, Served: true, Use: "llm-d's token producer (EPP)", Source: "vllm/entrypoints/scale_out/render/api_router.py"},
		{Path: "/v1/messages/render", Methods: []string{"POST"}, Source: "vllm/entrypoints/scale_out/render/api_router.py"},
		{Path: renderCompletionPath, Methods: []string{"POST"}, Served: true, Use: "llm-d's token producer (EPP)", Source: "vllm/entrypoints/scale_out/render/api_router.py"},
		{Path: "/v1/chat/completions/derender", Methods: []string{"POST"}, Source: "vllm/entrypoints/scale_out/derender/api_router.py"},
		{Path: "/v1/completions/derender", Methods: []string{"POST"}, Source: "vllm/entrypoints/scale_out/derender/api_router.py"},
		{Path: "/inference/v1/generate", Methods: []string{"POST"}, Source: "vllm/entrypoints/scale_out/token_in_token_out/api_router.py"},
	},
}
