package operator

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/gpustack/routing-conformance/api"
)

// ConfigMap keys of <md>-router (llm-d-router only) and where the router
// Pod mounts the ConfigMap (model_deployment_router.go @36d990eb).
const (
	ConfigKeyEPP         = "epp.yaml"
	ConfigKeyEnvoy       = "envoy.yaml"
	ConfigKeySelector    = "endpoint-selector"
	ConfigKeyTargetPorts = "endpoint-target-ports"
	ConfigKeyExtraArgs   = "extra-args.json"
	RouterConfigMount    = "/config"
)

// Ports of the epp container: ext_proc gRPC, gRPC health, metrics.
const (
	EPPGRPCPort   = 9002
	EPPHealthPort = 9003
)

// DefaultRouterProxyImage is the setting model-deployment-router-proxy-image's
// default (docs/operator.md#versions-and-images).
const DefaultRouterProxyImage = "gpustack/mirrored-envoy:distroless-v1.33.2"

// ProgramEnvoy is what the proxy image runs: its entrypoint (the container
// renders no command).
var ProgramEnvoy = []string{"envoy"}

// DefaultRouteTimeoutSeconds is the envoy route timeout without
// spec.router.requestTimeoutSeconds.
const DefaultRouteTimeoutSeconds = 86400

// ContainerTemplate is one container of the router Pod template.
type ContainerTemplate struct {
	Name  string
	Image string
	// Command is the container's command as the Pod spec carries it (nil
	// for envoy, whose image entrypoint runs).
	Command []string
	// Program is what runs: Command, or the image's entrypoint.
	Program []string
	Args    []string
	Env     []EnvVarSource
	Ports   []ContainerPort
	// ReadinessTCP and ReadinessGRPC are the readiness probe's port (0: no
	// probe of that kind).
	ReadinessTCP, ReadinessGRPC int
	// ConfigMount is where the router ConfigMap is mounted ("": not mounted).
	ConfigMount string
	// WatchPods: the program discovers Pods through the API.
	WatchPods bool
}

// EnvVarSource is an env entry whose value is given (Value) or comes from
// the router ConfigMap (ConfigMapKey) or the downward API (FieldPath).
type EnvVarSource struct {
	Name         string
	Value        string
	ConfigMapKey string
	FieldPath    string
}

// ContainerPort is a named container port.
type ContainerPort struct {
	Name string
	Port int
}

// llmdContainers is the llm-d router Pod's two containers: envoy in front,
// epp beside it reading its selector and ports from the ConfigMap through
// env, its own name and namespace through the downward API.
func llmdContainers(eppImage string, args []string) []ContainerTemplate {
	return []ContainerTemplate{
		{
			Name: api.ContainerEnvoy, Image: DefaultRouterProxyImage, Program: ProgramEnvoy,
			Args:         []string{"-c", RouterConfigMount + "/" + ConfigKeyEnvoy},
			Ports:        []ContainerPort{{Name: "http", Port: api.RouterHTTPPort}},
			ReadinessTCP: api.RouterHTTPPort, ConfigMount: RouterConfigMount,
		},
		{
			Name: api.ContainerEPP, Image: eppImage, Command: []string{BinaryEPP}, Program: []string{BinaryEPP},
			Args: args,
			Env: []EnvVarSource{
				{Name: "ENDPOINT_SELECTOR", ConfigMapKey: ConfigKeySelector},
				{Name: "ENDPOINT_TARGET_PORTS", ConfigMapKey: ConfigKeyTargetPorts},
				{Name: "NAMESPACE", FieldPath: "metadata.namespace"},
				{Name: "POD_NAME", FieldPath: "metadata.name"},
			},
			Ports: []ContainerPort{{Name: "grpc", Port: EPPGRPCPort}, {Name: "grpc-health", Port: EPPHealthPort},
				{Name: "metrics", Port: api.RouterMetricsPort}},
			ReadinessGRPC: EPPHealthPort, ConfigMount: RouterConfigMount, WatchPods: true,
		},
	}
}

// RenderEnvoyConfig is envoy.yaml: one listener on 8081 with the route
// timeout (requestTimeoutSeconds, else a day), the header_mutation filter
// that drops a client's x-gateway-destination-endpoint ahead of ext_proc,
// ext_proc to 127.0.0.1:9002 with failure_mode_allow, the ORIGINAL_DST
// cluster routed by that header, and a JSON access log on stdout
// (gpustack/gpustack-operator@36d990eb72edd26a49ac7fd5d52aefaadde99513:
// pkg/worker/controllers/worker/model_deployment_router.go,
// renderModelDeploymentRouterEnvoyConfig; its comments are not rendered here).
func RenderEnvoyConfig(timeoutSeconds *int32) string {
	timeout := DefaultRouteTimeoutSeconds
	if timeoutSeconds != nil {
		timeout = int(*timeoutSeconds)
	}
	return strings.ReplaceAll(envoyTemplate, "<ROUTE-TIMEOUT>", strconv.Itoa(timeout))
}

const envoyTemplate = `static_resources:
  listeners:
  - name: http
    address:
      socket_address: {address: 0.0.0.0, port_value: 8081}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: router
          route_config:
            name: router
            virtual_hosts:
            - name: model
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                route: {cluster: original_destination_cluster, timeout: <ROUTE-TIMEOUT>s}
          access_log:
          - name: envoy.access_loggers.stdout
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog
              log_format:
                json_format:
                  start_time: "%START_TIME%"
                  method: "%REQ(:METHOD)%"
                  path: "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%"
                  protocol: "%PROTOCOL%"
                  response_code: "%RESPONSE_CODE%"
                  response_flags: "%RESPONSE_FLAGS%"
                  response_code_details: "%RESPONSE_CODE_DETAILS%"
                  duration: "%DURATION%"
                  upstream_host: "%UPSTREAM_HOST%"
                  request_id: "%REQ(X-REQUEST-ID)%"
                  bytes_received: "%BYTES_RECEIVED%"
                  bytes_sent: "%BYTES_SENT%"
          http_filters:
          - name: envoy.filters.http.header_mutation
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation
              mutations:
                request_mutations:
                - remove: x-gateway-destination-endpoint
          - name: envoy.filters.http.ext_proc
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor
              failure_mode_allow: true
              grpc_service:
                envoy_grpc: {cluster_name: ext_proc, authority: "localhost:9002"}
                timeout: 10s
              processing_mode:
                request_header_mode: SEND
                response_header_mode: SEND
                request_body_mode: FULL_DUPLEX_STREAMED
                response_body_mode: FULL_DUPLEX_STREAMED
                request_trailer_mode: SEND
                response_trailer_mode: SEND
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: original_destination_cluster
    type: ORIGINAL_DST
    connect_timeout: 1s
    lb_policy: CLUSTER_PROVIDED
    original_dst_lb_config:
      use_http_header: true
      http_header_name: x-gateway-destination-endpoint
  - name: ext_proc
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config:
          http2_protocol_options: {}
    load_assignment:
      cluster_name: ext_proc
      endpoints:
      - lb_endpoints:
        - endpoint:
            address:
              socket_address: {address: 127.0.0.1, port_value: 9002}
`

// VLLMKVEventsTopic is the topic of the vLLM KV-event publisher the
// operator renders on a producing vLLM role under llm-d-router
// (pkg/worker/kvcache/inject/vllm.go @25ee4bf1; the ports are
// VLLMKVEventsPort and VLLMKVEventsReplayPort).
const VLLMKVEventsTopic = "kv@"

// publishesKVEvents is modelDeploymentPublishesKVEvents
// (pkg/worker/controllers/worker/model_deployment_connector.go @049325a5):
// a routed deployment (off Ascend, which the sim never is) under
// llm-d-router on vLLM, a managed role, any kind but Decode. It is not
// limited to prefill/decode pairs: a plain Server role publishes too.
func publishesKVEvents(md *api.ModelDeployment, role *api.Role) bool {
	return md.Spec.Router != nil && md.Spec.Router.Name == api.RouterLLMD &&
		md.Spec.Engine.Name == api.EngineVLLM && len(role.Command) == 0 &&
		role.RoleKind() != api.RoleKindDecode
}

// kvEventsArgs is --kv-events-config with the document the operator
// renders, field for field in its order.
func kvEventsArgs() []string {
	doc, _ := json.Marshal(struct {
		Enable       bool   `json:"enable_kv_cache_events"`
		Publisher    string `json:"publisher"`
		Endpoint     string `json:"endpoint"`
		Replay       string `json:"replay_endpoint"`
		BufferSteps  int    `json:"buffer_steps"`
		HWM          int    `json:"hwm"`
		MaxQueueSize int    `json:"max_queue_size"`
		Topic        string `json:"topic"`
	}{true, "zmq", "tcp://*:" + strconv.Itoa(int(VLLMKVEventsPort)), "tcp://*:" + strconv.Itoa(int(VLLMKVEventsReplayPort)),
		10_000, 100_000, 100_000, VLLMKVEventsTopic})
	return []string{"--kv-events-config", string(doc)}
}
