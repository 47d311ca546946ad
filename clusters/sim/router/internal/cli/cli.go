// Package cli is what vllm-router's and sgl-model-gateway's command lines
// share: both CliArgs descend from the same struct, so the flags they have
// in common (host and ports, workers and PD lists, policies, service
// discovery, retries, circuit breaker, health checks) are read into one
// Common, validated and rendered in one place. Each router keeps its own
// clap command, its own extra flags and the few lines its main prints
// differently (Startup).
package cli

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/gpustack/routing-conformance/clusters/sim/proc"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/clap"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/debug"
)

// Streams are the container's stdout and stderr (io.Discard when unset).
func Streams(c *proc.Container) (out, errw io.Writer) {
	return writerOr(c.Stdout), writerOr(c.Stderr)
}

func writerOr(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// Parse is clap's parse for cmd. On a clap error it writes clap's text where
// clap does (stdout for --help/--version, else stderr) and returns nil
// matches and the exit code.
func Parse(cmd *clap.Command, args []string, out, errw io.Writer) (*clap.Matches, int) {
	m, err := clap.Parse(cmd, args)
	if err == nil {
		return m, 0
	}
	var ce *clap.Error
	if errors.As(err, &ce) {
		if ce.ToStdout() {
			_, _ = io.WriteString(out, ce.Text)
		} else {
			_, _ = io.WriteString(errw, ce.Text)
		}
		return nil, ce.ExitCode()
	}
	fmt.Fprintf(errw, "Error: %v\n", err)
	return nil, 2
}

// Optional is an Option<String> flag: nil when absent.
func Optional(m *clap.Matches, long string) *string {
	if v, ok := m.Optional(long); ok {
		return &v
	}
	return nil
}

// Deref is an Option<String>'s value, "" for None.
func Deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// PrefillArg is one hand-parsed `--prefill URL [PORT|none]` (each router's
// main takes these out of the argv its own way before clap sees it).
type PrefillArg struct {
	URL  string
	Port *int
}

// PrefillDebug is `{:?}` of the Vec<(String, Option<u16>)> of prefill URLs.
func PrefillDebug(pre []PrefillArg) string {
	items := make([]string, len(pre))
	for i, p := range pre {
		port := "None"
		if p.Port != nil {
			port = "Some(" + strconv.Itoa(*p.Port) + ")"
		}
		items[i] = "(" + debug.Str(p.URL) + ", " + port + ")"
	}
	return debug.Vec(items)
}

// Secs is a u64 seconds flag as a Duration, saturating instead of
// overflowing.
func Secs(n uint64) time.Duration {
	if n > uint64(1<<62)/uint64(time.Second) {
		return time.Duration(1 << 62)
	}
	return time.Duration(n) * time.Second
}

// HostPort joins a --host and a --port.
func HostPort(host string, port uint64) string {
	return net.JoinHostPort(host, strconv.FormatUint(port, 10))
}
