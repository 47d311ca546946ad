// Command routing-sim runs one ModelDeployment on the embedded sim target, for
// manual runs: the operator's admission and rendering, the router and the
// engines, each on its own loopback address.
//
//	routing-sim -f md.yaml [--timeout 60s] [--namespace default]
//	            [--ttft 5ms] [--itl 1ms] [--output-tokens 16] [--startup-delay 0s]
//
// It admits the object (a refusal or a malformed file exits 2 naming the
// field and the accepted values), waits until the deployment is ready
// (exit 1 if it is not within --timeout), prints the router URL, the router
// metrics URL and each replica's URL, streams the router's stdout and stderr,
// and serves until SIGINT or SIGTERM, then deletes everything and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/clusters/sim"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/sim/kubelet"
	"github.com/gpustack/routing-conformance/sim/operator"
	"github.com/gpustack/routing-conformance/sim/programs"
	"github.com/gpustack/routing-conformance/sim/upstream"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the deployment did not come up, or cleanup failed
	exitUsage   = 2 // bad flags, an unreadable or malformed file, an admission refusal
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, programs.Registry{}))
}

// lockedWriter serialises writes from the many goroutines that log.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// run is the whole command; ctx ending is the interrupt.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, progs programs.Registry) int {
	var mu sync.Mutex
	stdout, stderr = lockedWriter{&mu, stdout}, lockedWriter{&mu, stderr}

	fs := flag.NewFlagSet("routing-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "", "ModelDeployment YAML or JSON file (- reads stdin)")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait for the deployment to be ready")
	namespace := fs.String("namespace", "default", "namespace when metadata.namespace is empty")
	ttft := fs.Duration("ttft", 0, "engines' time to first token (SIM_ENGINE_TTFT; 0 = engine default)")
	itl := fs.Duration("itl", 0, "engines' inter-token latency (SIM_ENGINE_ITL; 0 = engine default)")
	tokens := fs.Int("output-tokens", 0, "tokens generated when max_tokens is absent (0 = engine default)")
	startup := fs.Duration("startup-delay", 0, "engines' startup delay before /health answers")
	seed := fs.Uint64("picker-seed", 0, "seed of llm-d-router's random tie-break (0 = each epp seeds from the clock)")
	llmd := fs.String("llmd", config.SimLLMDEmulated, "llm-d-router's epp container: emulated, or upstream (the EPP make upstream-llmd built)")
	routersDir := fs.String("routers-dir", os.Getenv(config.EnvRoutersDir), "the make routers build vllm-router and sgl-model-gateway run from (default $"+config.EnvRoutersDir+", else the repository's .routers)")
	llmdDir := fs.String("llmd-dir", os.Getenv(config.EnvLLMDDir), "the make upstream-llmd build -llmd=upstream runs (default $"+config.EnvLLMDDir+", else the repository's .upstream-llmd)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: routing-sim -f md.yaml [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "routing-sim: unexpected arguments %q; the deployment comes from -f\n", fs.Args())
		return exitUsage
	}
	if *file == "" {
		fmt.Fprintln(stderr, "routing-sim: -f is required: a ModelDeployment YAML file (or - for stdin)")
		return exitUsage
	}
	if *timeout <= 0 {
		fmt.Fprintln(stderr, "routing-sim: --timeout must be positive")
		return exitUsage
	}

	var data []byte
	var err error
	if *file == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(*file)
	}
	if err != nil {
		fmt.Fprintf(stderr, "routing-sim: %v\n", err)
		return exitUsage
	}
	md, err := decodeModelDeployment(data)
	if err != nil {
		fmt.Fprintf(stderr, "routing-sim: %s: %v\n", *file, err)
		return exitUsage
	}
	if md.Metadata.Namespace == "" {
		md.Metadata.Namespace = *namespace
	}
	if errs := operator.Validate(nil, md); len(errs) > 0 {
		fmt.Fprintf(stderr, "routing-sim: %s: the operator refuses this ModelDeployment:\n", *file)
		for _, e := range errs {
			fmt.Fprintf(stderr, "  %s: %s%s\n", e.Field, e.Message, acceptedHint(e))
		}
		return exitUsage
	}

	// vllm-router and sgl-model-gateway run as their binaries built from
	// source (make routers); a test may pass a program of its own instead.
	var routers *upstream.Install
	if r := md.Spec.Router; r != nil && upstream.Supports(r.Name) {
		if main, _ := progs.Router(r.Name); main == nil {
			in, err := upstream.Load(*routersDir)
			if err != nil {
				fmt.Fprintf(stderr, "routing-sim: %s runs as its binary built from source: %v\n", r.Name, err)
				return exitFailure
			}
			routers = in
		}
	}
	var epp *upstream.EPPInstall
	if r := md.Spec.Router; r != nil && r.Name == api.RouterLLMD && *llmd != config.SimLLMDEmulated {
		if *llmd != config.SimLLMDUpstream {
			fmt.Fprintf(stderr, "routing-sim: -llmd=%s: accepted values: %s\n", *llmd, strings.Join(config.SimLLMDModes, ", "))
			return exitUsage
		}
		in, err := upstream.LoadEPP(*llmdDir)
		if err != nil {
			fmt.Fprintf(stderr, "routing-sim: -llmd=upstream: %v\n", err)
			return exitFailure
		}
		epp = in
	}
	cluster := sim.New(sim.Options{
		Programs:   progs,
		Routers:    routers,
		LLMD:       epp,
		Engine:     sim.EngineKnobs{TTFT: *ttft, ITL: *itl, OutputTokens: *tokens, StartupDelay: *startup},
		PickerSeed: *seed,
		Kubelet: kubelet.Options{LogSink: func(l kubelet.LogLine) {
			switch l.Container {
			case api.ContainerRouter, api.ContainerEPP, api.ContainerEnvoy:
			default:
				return
			}
			w := stdout
			if l.Stream == "stderr" {
				w = stderr
			}
			fmt.Fprintf(w, "[%s] %s\n", l.Pod, l.Text)
		}},
	})
	code := serve(ctx, cluster, md, *timeout, stdout, stderr)
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cluster.Close(cctx); err != nil {
		fmt.Fprintf(stderr, "routing-sim: cleanup: %v\n", err)
		if code == exitOK {
			code = exitFailure
		}
	}
	return code
}

func serve(ctx context.Context, cluster *sim.Cluster, md *api.ModelDeployment, timeout time.Duration,
	stdout, stderr io.Writer) int {
	d, err := cluster.Deploy(ctx, md)
	if err != nil {
		fmt.Fprintf(stderr, "routing-sim: %v\n", err)
		var ae *clusters.AdmissionError
		if errors.As(err, &ae) {
			return exitUsage
		}
		return exitFailure
	}
	key := d.Namespace() + "/" + d.Name()
	fmt.Fprintf(stdout, "routing-sim: ModelDeployment %s admitted; waiting up to %s for it to be ready\n", key, timeout)
	wctx, cancel := context.WithTimeout(ctx, timeout)
	err = d.WaitReady(wctx, 50*time.Millisecond)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stdout, "routing-sim: interrupted; deleting")
			return exitOK
		}
		fmt.Fprintf(stderr, "routing-sim: %v\n", err)
		return exitFailure
	}
	obj, err := d.Object(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "routing-sim: %v\n", err)
		return exitFailure
	}
	var b strings.Builder
	fmt.Fprintf(&b, "routing-sim: %s is %s (%s)\n", key, obj.Status.Phase, obj.Status.RoleSummary)
	if obj.Spec.Router != nil {
		base, err := d.OpenAIBaseURL(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "routing-sim: %v\n", err)
			return exitFailure
		}
		fmt.Fprintf(&b, "  router (%s):     %s (the %s-router Service)\n", obj.Spec.Router.Name, base, obj.Metadata.Name)
		pods, err := d.RouterState(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "routing-sim: %v\n", err)
			return exitFailure
		}
		for _, p := range pods {
			fmt.Fprintf(&b, "  router metrics:  http://%s:%d/metrics (%s)\n", p.IP, api.RouterMetricsPort, p.Name)
		}
	}
	reps, err := d.Replicas(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "routing-sim: %v\n", err)
		return exitFailure
	}
	for _, r := range reps {
		fmt.Fprintf(&b, "  replica %s (role %s, %s): %s/v1  metrics %s:%d/metrics\n", r.Name, r.Role, r.Kind,
			r.URL(), "http://"+r.IP, r.MetricsPort)
	}
	b.WriteString("routing-sim: serving until interrupted (Ctrl-C)\n")
	fmt.Fprint(stdout, b.String())
	<-ctx.Done()
	fmt.Fprintln(stdout, "routing-sim: interrupted; deleting")
	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer dcancel()
	if err := d.Delete(dctx); err != nil {
		fmt.Fprintf(stderr, "routing-sim: delete: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "routing-sim: %s deleted\n", key)
	return exitOK
}

// acceptedHint names the accepted values of an enum field reported missing.
func acceptedHint(e *api.AdmissionError) string {
	if e.Message != "Required value" {
		return ""
	}
	switch {
	case e.Field == "spec.engine.name":
		return "; accepted values: " + strings.Join(api.Engines, ", ")
	case e.Field == "spec.router.name":
		return "; accepted values: " + strings.Join(api.Routers, ", ")
	case strings.HasSuffix(e.Field, ".kind"):
		return "; accepted values: " + strings.Join(api.RoleKinds, ", ")
	}
	return ""
}
