package routerlog

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gpustack/routing-conformance/assertions/rustdebug"
)

// BannerMarker starts the message both routers log from server::startup().
const BannerMarker = "Starting router on "

// Banner is one parsed startup banner:
// VR: `Starting router on {host}:{port} | mode: {mode:?} | policy: {policy:?} | kv_connector: {kv:?} | max_payload: {MB}MB`;
// SG: the same without kv_connector.
type Banner struct {
	Line    Line            `json:"line"`
	Address string          `json:"address"` // "0.0.0.0:8081"
	Mode    rustdebug.Value `json:"mode"`    // JSON: the Debug text
	Policy  rustdebug.Value `json:"policy"`  // JSON: the Debug text
	// KVConnector is vllm-router's connector (Nixl, Mooncake, MoriIO);
	// HasKVConnector is false for sgl-model-gateway, which does not print it.
	KVConnector    rustdebug.Value `json:"kvConnector"`
	HasKVConnector bool            `json:"hasKvConnector"`
	MaxPayload     string          `json:"maxPayload,omitempty"` // "512MB"
	// Other holds any further `| key: value` parts, as text, so a newer
	// router's additions do not break the parse.
	Other map[string]string `json:"other,omitempty"`
}

// PolicyName is the policy's variant name: "CacheAware", "RoundRobin", ...
func (b Banner) PolicyName() string { return b.Policy.TypeName() }

// ModeName is the routing mode's variant name: "Regular", "VllmPrefillDecode", ...
func (b Banner) ModeName() string { return b.Mode.TypeName() }

// Summary is the banner's message as the router printed it.
func (b Banner) Summary() string { return b.Line.Message }

// NoBannerError says the logs hold no parseable banner, with the evidence.
type NoBannerError struct {
	Lines int // how many lines were searched
	// Tail is the end of the log (at most 20 lines), where the banner or the
	// reason it is missing (a clap error, a crash) would be.
	Tail []string
	// Malformed are banner lines that did not parse, with why.
	Malformed []error
}

func (e *NoBannerError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no router startup banner (%q...) in %d log lines", BannerMarker, e.Lines)
	for _, m := range e.Malformed {
		fmt.Fprintf(&b, "\n  unparseable banner: %v", m)
	}
	if len(e.Tail) == 0 {
		b.WriteString("; the log is empty")
		return b.String()
	}
	fmt.Fprintf(&b, "; last %d lines:", len(e.Tail))
	for _, l := range e.Tail {
		b.WriteString("\n  | ")
		b.WriteString(l)
	}
	return b.String()
}

// FindBanners returns every banner in the logs in order (a restarted
// container's previous run comes first), and an error for each line that
// carries the marker but does not parse.
func FindBanners(logs string) ([]Banner, []error) {
	var out []Banner
	var bad []error
	for _, l := range Lines(logs) {
		if !strings.Contains(l.Message, BannerMarker) {
			continue
		}
		b, err := ParseBanner(l)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		out = append(out, b)
	}
	return out, bad
}

// FindBanner returns the last banner in the logs: the running process's.
// Without one the error is a *NoBannerError carrying the log's tail.
func FindBanner(logs string) (Banner, error) {
	bs, bad := FindBanners(logs)
	if len(bs) > 0 {
		return bs[len(bs)-1], nil
	}
	lines := Lines(logs)
	return Banner{}, &NoBannerError{Lines: len(lines), Tail: Tail(lines, 20), Malformed: bad}
}

// ParseBanner reads the banner out of one log line.
func ParseBanner(l Line) (Banner, error) {
	msg := l.Message
	i := strings.Index(msg, BannerMarker)
	if i < 0 {
		return Banner{}, fmt.Errorf("line %d: no %q in %q", l.Number, BannerMarker, msg)
	}
	b := Banner{Line: l}
	rest := msg[i+len(BannerMarker):]
	addr, rest, _ := strings.Cut(rest, " | ")
	b.Address = strings.TrimSpace(addr)
	fail := func(format string, args ...any) (Banner, error) {
		return Banner{}, fmt.Errorf("line %d: banner %q: %s", l.Number, clip(msg, 300), fmt.Sprintf(format, args...))
	}
	seen := map[string]bool{}
	for rest != "" {
		key, after, ok := strings.Cut(rest, ": ")
		if !ok {
			return fail("expected `key: value` at %q", clip(rest, 60))
		}
		key = strings.TrimSpace(key)
		if seen[key] {
			return fail("%s appears twice", key)
		}
		seen[key] = true
		switch key {
		case "mode", "policy", "kv_connector":
			v, n, err := rustdebug.ParsePrefix(after)
			if err != nil {
				return fail("%s: %v", key, err)
			}
			switch key {
			case "mode":
				b.Mode = v
			case "policy":
				b.Policy = v
			default:
				b.KVConnector, b.HasKVConnector = v, true
			}
			after = after[n:]
			if strings.TrimSpace(after) == "" {
				rest = ""
				continue
			}
			var sep bool
			if rest, sep = strings.CutPrefix(after, " | "); !sep {
				return fail("expected ' | ' after %s %s, found %q", key, v, clip(after, 60))
			}
		default:
			val, next, _ := strings.Cut(after, " | ")
			if key == "max_payload" {
				b.MaxPayload = strings.TrimSpace(val)
			} else {
				if b.Other == nil {
					b.Other = map[string]string{}
				}
				b.Other[key] = strings.TrimSpace(val)
			}
			rest = next
		}
	}
	if !seen["policy"] {
		return fail("no `policy:` part")
	}
	if !seen["mode"] {
		return fail("no `mode:` part")
	}
	return b, nil
}

// IsNoBanner reports whether err says the logs hold no banner.
func IsNoBanner(err error) bool {
	var e *NoBannerError
	return errors.As(err, &e)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
