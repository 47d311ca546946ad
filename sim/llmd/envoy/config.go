// Package envoy is the `envoy` container of an llm-d router Pod as a sim
// program: the data path gpustack-operator configures in envoy.yaml
// (gpustack/gpustack-operator@36d990eb72edd26a49ac7fd5d52aefaadde99513:
// pkg/worker/controllers/worker/model_deployment_router.go,
// modelDeploymentRouterEnvoyConfig). It listens on the listener's port,
// drops a client-supplied x-gateway-destination-endpoint (header_mutation
// ahead of ext_proc), asks the EPP over ext_proc gRPC (package extproc;
// failure_mode_allow lets a request through when the EPP is down or its
// stream fails), forwards to the ORIGINAL_DST address the EPP wrote in
// x-gateway-destination-endpoint with the route timeout, relays the
// response through the EPP (full duplex, chunk by chunk), and writes one JSON access-log line
// per request on stdout with the configured json_format fields.
package envoy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Config is what the proxy reads from envoy.yaml.
type Config struct {
	ListenPort int
	// RouteTimeout is the route's timeout (0 disables it, as in Envoy).
	RouteTimeout time.Duration
	// RemoveHeaders are the header_mutation filter's request removals.
	RemoveHeaders []string
	// ExtProcAddr is the ext_proc cluster's endpoint; FailureModeAllow its
	// failure_mode_allow.
	ExtProcAddr      string
	FailureModeAllow bool
	ExtProcTimeout   time.Duration
	// ExtProcAuthority is envoy_grpc.authority (the stream's :authority);
	// ExtProcConnectTimeout the ext_proc cluster's connect_timeout.
	ExtProcAuthority      string
	ExtProcConnectTimeout time.Duration
	// ProcessingMode is processing_mode's six fields by their YAML names,
	// Envoy's defaults filled in.
	ProcessingMode map[string]string
	// DestinationHeader is original_dst_lb_config.http_header_name.
	DestinationHeader string
	// AccessLog is the json_format fields in config order (nil: no log).
	AccessLog []LogField
}

// LogField is one json_format entry: an output key and its command.
type LogField struct {
	Key, Format string
}

// ParseConfig reads the subset of the bootstrap the operator renders.
func ParseConfig(data []byte) (*Config, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("unable to parse JSON as proto (%w)", err)
	}
	order, err := jsonFormatOrder(data)
	if err != nil {
		return nil, err
	}
	cfg := &Config{DestinationHeader: "x-envoy-original-dst-host"}
	sr, _ := doc["static_resources"].(map[string]any)
	listeners, _ := sr["listeners"].([]any)
	if len(listeners) == 0 {
		return nil, errors.New("static_resources.listeners: no listener")
	}
	l, _ := listeners[0].(map[string]any)
	cfg.ListenPort = toInt(dig(l, "address", "socket_address", "port_value"))
	chains, _ := l["filter_chains"].([]any)
	var hcm map[string]any
	for _, ch := range chains {
		for _, f := range asList(dig(ch, "filters")) {
			if dig(f, "name") == "envoy.filters.network.http_connection_manager" {
				hcm, _ = dig(f, "typed_config").(map[string]any)
			}
		}
	}
	if hcm == nil {
		return nil, errors.New("no http_connection_manager filter")
	}
	for _, vh := range asList(dig(hcm, "route_config", "virtual_hosts")) {
		for _, r := range asList(dig(vh, "routes")) {
			if t, ok := dig(r, "route", "timeout").(string); ok {
				d, err := parseProtoDuration(t)
				if err != nil {
					return nil, err
				}
				cfg.RouteTimeout = d
			} else {
				cfg.RouteTimeout = 15 * time.Second // Envoy's default route timeout
			}
		}
	}
	for _, f := range asList(dig(hcm, "http_filters")) {
		switch dig(f, "name") {
		case "envoy.filters.http.header_mutation":
			for _, m := range asList(dig(f, "typed_config", "mutations", "request_mutations")) {
				if h, ok := dig(m, "remove").(string); ok {
					cfg.RemoveHeaders = append(cfg.RemoveHeaders, strings.ToLower(h))
				}
			}
		case "envoy.filters.http.ext_proc":
			cfg.FailureModeAllow, _ = dig(f, "typed_config", "failure_mode_allow").(bool)
			if t, ok := dig(f, "typed_config", "grpc_service", "timeout").(string); ok {
				cfg.ExtProcTimeout, _ = parseProtoDuration(t)
			}
			cfg.ExtProcAuthority, _ = dig(f, "typed_config", "grpc_service", "envoy_grpc", "authority").(string)
			// ProcessingMode's defaults (processing_mode.proto): headers
			// SEND, bodies NONE, trailers SKIP.
			cfg.ProcessingMode = map[string]string{"request_header_mode": "SEND", "response_header_mode": "SEND",
				"request_body_mode": "NONE", "response_body_mode": "NONE", "request_trailer_mode": "SKIP", "response_trailer_mode": "SKIP"}
			if m, ok := dig(f, "typed_config", "processing_mode").(map[string]any); ok {
				for k, v := range m {
					if s, ok := v.(string); ok {
						cfg.ProcessingMode[k] = s
					}
				}
			}
		}
	}
	for _, a := range asList(dig(hcm, "access_log")) {
		if fmtMap, ok := dig(a, "typed_config", "log_format", "json_format").(map[string]any); ok {
			for _, k := range order {
				if v, ok := fmtMap[k].(string); ok {
					cfg.AccessLog = append(cfg.AccessLog, LogField{k, v})
				}
			}
		}
	}
	for _, c := range asList(sr["clusters"]) {
		switch dig(c, "type") {
		case "ORIGINAL_DST":
			if use, _ := dig(c, "original_dst_lb_config", "use_http_header").(bool); use {
				if h, ok := dig(c, "original_dst_lb_config", "http_header_name").(string); ok && h != "" {
					cfg.DestinationHeader = strings.ToLower(h)
				}
			}
		case "STATIC":
			if t, ok := dig(c, "connect_timeout").(string); ok {
				cfg.ExtProcConnectTimeout, _ = parseProtoDuration(t)
			}
			for _, ep := range asList(dig(c, "load_assignment", "endpoints")) {
				for _, lb := range asList(dig(ep, "lb_endpoints")) {
					sa := dig(lb, "endpoint", "address", "socket_address")
					cfg.ExtProcAddr = fmt.Sprintf("%v:%d", dig(sa, "address"), toInt(dig(sa, "port_value")))
				}
			}
		}
	}
	if cfg.ListenPort == 0 {
		return nil, errors.New("listener has no port_value")
	}
	if err := cfg.checkProcessingMode(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// operatorMode is the processing_mode the operator renders, the one mode
// this Envoy implements: headers sent and answered, bodies full duplex
// (the EPP answers the request headers only once the body has ended, so
// no other body mode works with it), trailers SEND (an HTTP/1.1 exchange
// has none to send).
var operatorMode = map[string]string{"request_header_mode": "SEND", "response_header_mode": "SEND",
	"request_body_mode": "FULL_DUPLEX_STREAMED", "response_body_mode": "FULL_DUPLEX_STREAMED",
	"request_trailer_mode": "SEND", "response_trailer_mode": "SEND"}

func (c *Config) checkProcessingMode() error {
	if c.ProcessingMode == nil {
		return nil
	}
	for k, want := range operatorMode {
		if got := c.ProcessingMode[k]; got != want {
			return fmt.Errorf("ext_proc processing_mode.%s: %s is not emulated (the sim's Envoy implements the operator's mode, %s)", k, got, want)
		}
	}
	return nil
}

// jsonFormatOrder recovers json_format's key order from the YAML text (a
// map loses it; Envoy keeps the configured order).
func jsonFormatOrder(data []byte) ([]string, error) {
	var keys []string
	lines := strings.Split(string(data), "\n")
	for i, line := range lines {
		if strings.TrimSpace(line) != "json_format:" {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		for _, l := range lines[i+1:] {
			t := strings.TrimSpace(l)
			if t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			if len(l)-len(strings.TrimLeft(l, " ")) <= indent {
				break
			}
			if k, _, ok := strings.Cut(t, ":"); ok {
				keys = append(keys, strings.Trim(k, `"`))
			}
		}
	}
	return keys, nil
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func toInt(v any) int {
	switch n := v.(type) {
	case float64:
		return int(n)
	case int:
		return n
	case string:
		i, _ := strconv.Atoi(n)
		return i
	}
	return 0
}

// parseProtoDuration reads a protobuf JSON duration ("86400s", "1.5s").
func parseProtoDuration(s string) (time.Duration, error) {
	if !strings.HasSuffix(s, "s") {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	f, err := strconv.ParseFloat(strings.TrimSuffix(s, "s"), 64)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	return time.Duration(f * float64(time.Second)), nil
}
