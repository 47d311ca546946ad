// Package kind is a throwaway cluster for the suite: it creates a kind
// cluster through e2e-framework's kind support (which shells out to the
// `kind` binary), installs gpustack-operator from a Helm chart with `helm`,
// waits until the kube target's preflight passes, and then is the kube target.
// Close deletes the cluster unless asked to keep it (E2E_KEEP_CLUSTER=1), and
// never deletes a cluster it did not create.
package kind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"sigs.k8s.io/e2e-framework/support"
	e2ekind "sigs.k8s.io/e2e-framework/support/kind"

	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/clusters/kube"
	"github.com/gpustack/routing-conformance/config"
)

// Options configure the throwaway cluster. The suite passes e2e.yaml's kind
// block (clusterName, config, nodeImage, operatorChart, keepCluster).
type Options struct {
	// Name is the kind cluster name (default "routing-conformance").
	Name string
	// Config is a kind cluster config file (extra mounts for GPUs, the
	// aggregator-routing flag the operator's CI sets); empty: kind's default.
	Config string
	// NodeImage is the kindest/node image; empty: kind's default.
	NodeImage string
	// Chart is the gpustack-operator chart: a directory, a .tgz or an
	// oci:// reference. Required.
	Chart string
	// ChartVersion pins an OCI or repository chart's version.
	ChartVersion string
	// Release is the Helm release name (default "gpustack-operator").
	Release string
	// HelmValuesFiles are passed as -f, HelmSet as --set, in order.
	HelmValuesFiles []string
	HelmSet         []string
	// HelmTimeout bounds `helm --wait` (default 10m).
	HelmTimeout time.Duration
	// ReadyTimeout bounds the wait for the kube preflight to pass after the
	// install (webhook Service endpoints come up after the chart reports
	// ready; default 5m).
	ReadyTimeout time.Duration
	// Keep leaves the cluster running after Close (the suite passes
	// kind.keepCluster, which E2E_KEEP_CLUSTER overrides); KeepReason says
	// who asked, for the line Close prints (default "keep is set").
	Keep       bool
	KeepReason string
	// KindPath, HelmPath and DockerPath name the binaries; empty: $PATH.
	KindPath, HelmPath, DockerPath string
	// Kube configures the kube target run against the new cluster; its
	// Kubeconfig and Target are set here. OperatorNamespace is also the
	// namespace the chart is installed into (default gpustack-system).
	Kube kube.Options
	// Logf receives progress lines; nil: silent.
	Logf func(format string, args ...any)
}

// Cluster is a kind cluster with the operator installed, used as kube.
type Cluster struct {
	*kube.Cluster
	opts       Options
	provider   support.E2EClusterProvider
	kubeconfig string
	created    bool
}

var _ clusters.Cluster = (*Cluster)(nil)

// tools are the resolved binaries; resolved once so every error about a
// missing one is a single line before anything is created.
type tools struct{ kind, helm, docker string }

// preflightFunc waits until the kube target is usable; a variable so tests
// can stand in for an API server they do not have.
var preflightFunc = func(ctx context.Context, c *kube.Cluster, poll time.Duration) error {
	var last error
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if last = c.Preflight(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (waited for the operator after helm install: %v)", last, ctx.Err())
		case <-t.C:
		}
	}
}

// Create makes (or reuses) the kind cluster, installs the operator and
// returns the cluster as the kube target. On any failure after creating the
// cluster it deletes it again (unless Keep).
func Create(ctx context.Context, opts Options) (*Cluster, error) {
	opts = withDefaults(opts)
	tl, err := findTools(ctx, opts)
	if err != nil {
		return nil, err
	}
	for what, p := range map[string]string{"kind.config": opts.Config, "kind binary": tl.kind} {
		if strings.ContainsAny(p, " \t") {
			return nil, fmt.Errorf("kind: %s path %q contains whitespace; e2e-framework's kind support splits its command line on spaces: move it", what, p)
		}
	}
	if opts.Config != "" {
		if _, err := os.Stat(opts.Config); err != nil {
			return nil, fmt.Errorf("kind: config file %s: %v", opts.Config, err)
		}
	}

	existed, err := clusterExists(ctx, tl.kind, opts.Name)
	if err != nil {
		return nil, err
	}
	var copts []support.ClusterOpts
	if opts.NodeImage != "" {
		copts = append(copts, e2ekind.WithImage(opts.NodeImage))
	}
	prov := e2ekind.NewProvider().WithName(opts.Name).WithPath(tl.kind).WithOpts(copts...)
	c := &Cluster{opts: opts, provider: prov, created: !existed}
	if existed {
		opts.logf("kind: reusing existing cluster %s (it will not be deleted)", opts.Name)
	} else {
		opts.logf("kind: creating cluster %s (image %s, config %s)", opts.Name, orDefault(opts.NodeImage), orDefault(opts.Config))
	}
	kc, err := prov.CreateWithConfig(ctx, opts.Config)
	if err != nil {
		return nil, c.failed(ctx, fmt.Errorf("kind: create cluster %s: %s", opts.Name, oneLine(err.Error())))
	}
	c.kubeconfig = kc

	if err := helmInstall(ctx, tl.helm, opts, kc); err != nil {
		return nil, c.failed(ctx, err)
	}

	kopts := opts.Kube
	kopts.Kubeconfig = kc
	kopts.Context = ""
	kopts.InCluster = false
	kopts.Target = config.TargetKind
	kc2, err := kube.New(kopts)
	if err != nil {
		return nil, c.failed(ctx, err)
	}
	c.Cluster = kc2
	rctx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	if err := preflightFunc(rctx, kc2, 5*time.Second); err != nil {
		return nil, c.failed(ctx, err)
	}
	return c, nil
}

// Kubeconfig is the path of the cluster's kubeconfig (a temp file).
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// Describe is kube's, noting the node image.
func (c *Cluster) Describe(ctx context.Context) (clusters.Environment, error) {
	env, err := c.Cluster.Describe(ctx)
	env.Notes = append(env.Notes, fmt.Sprintf("kind cluster %s, node image %s", c.opts.Name, orDefault(c.opts.NodeImage)))
	return env, err
}

// Close stops port-forwards and deletes the cluster, unless it is kept or
// was not created by this run.
func (c *Cluster) Close(ctx context.Context) error {
	var errs []error
	if c.Cluster != nil {
		errs = append(errs, c.Cluster.Close(ctx))
	}
	errs = append(errs, c.destroy(ctx))
	return errors.Join(errs...)
}

func (c *Cluster) failed(ctx context.Context, err error) error {
	if derr := c.destroy(context.WithoutCancel(ctx)); derr != nil {
		return fmt.Errorf("%w; deleting the cluster also failed: %v", err, derr)
	}
	return err
}

func (c *Cluster) destroy(ctx context.Context) error {
	switch {
	case !c.created:
		return nil
	case c.opts.Keep:
		c.opts.logf("kind: keeping cluster %s (%s); delete it with: kind delete cluster --name %s", c.opts.Name, c.opts.KeepReason, c.opts.Name)
		return nil
	}
	c.opts.logf("kind: deleting cluster %s", c.opts.Name)
	if err := c.provider.Destroy(ctx); err != nil {
		return fmt.Errorf("kind: delete cluster %s: %s", c.opts.Name, oneLine(err.Error()))
	}
	c.created = false
	return nil
}

func withDefaults(o Options) Options {
	if o.Name == "" {
		o.Name = "routing-conformance"
	}
	if o.Release == "" {
		o.Release = "gpustack-operator"
	}
	if o.Kube.OperatorNamespace == "" {
		o.Kube.OperatorNamespace = kube.DefaultOperatorNamespace
	}
	if o.HelmTimeout <= 0 {
		o.HelmTimeout = 10 * time.Minute
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 5 * time.Minute
	}
	if o.KeepReason == "" {
		o.KeepReason = "keep is set"
	}
	if o.Logf == nil {
		o.Logf = o.Kube.Logf
	}
	return o
}

func (o Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}

// findTools resolves docker, kind and helm and checks that Docker's daemon
// answers, each failure one line saying what to install or start.
func findTools(ctx context.Context, o Options) (tools, error) {
	var t tools
	var err error
	if o.Chart == "" {
		return t, errors.New("kind: no operator chart: set kind.operatorChart in e2e.yaml or E2E_OPERATOR_CHART to the gpustack-operator chart (directory, .tgz or oci:// reference)")
	}
	if t.docker, err = lookPath(o.DockerPath, "docker"); err != nil {
		return t, fmt.Errorf("kind target needs docker: %v; install Docker (kind runs its nodes as containers) or use E2E_TARGET=kube with an existing cluster", err)
	}
	if t.kind, err = lookPath(o.KindPath, "kind"); err != nil {
		return t, fmt.Errorf("kind target needs the kind binary: %v; install it (go install sigs.k8s.io/kind@v0.33.0) or use E2E_TARGET=kube", err)
	}
	if t.helm, err = lookPath(o.HelmPath, "helm"); err != nil {
		return t, fmt.Errorf("kind target needs helm to install gpustack-operator: %v; install Helm 3 (https://helm.sh/docs/intro/install/)", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, t.docker, "info", "--format", "{{.ServerVersion}}").CombinedOutput()
	if err != nil {
		return t, fmt.Errorf("kind target needs a running Docker daemon: docker info: %s; start Docker (or fix DOCKER_HOST) and retry", lastLine(string(out), err))
	}
	return t, nil
}

func lookPath(explicit, name string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("%s not found at %s", name, explicit)
		}
		return explicit, nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s not found in PATH", name)
	}
	return p, nil
}

// clusterExists asks kind itself, so a cluster this run did not create is
// never deleted by it.
func clusterExists(ctx context.Context, kindPath, name string) (bool, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kindPath, "get", "clusters")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return false, fmt.Errorf("kind get clusters: %s", lastLine(stderr.String(), err))
	}
	for _, l := range strings.Split(stdout.String(), "\n") {
		if strings.TrimSpace(l) == name {
			return true, nil
		}
	}
	return false, nil
}

// HelmArgs is the `helm` command line that installs the operator; exported
// so the README and tests show exactly what runs.
func HelmArgs(o Options, kubeconfig string) []string {
	o = withDefaults(o)
	args := []string{"upgrade", "--install", o.Release, o.Chart,
		"--namespace", o.Kube.OperatorNamespace, "--create-namespace",
		"--kubeconfig", kubeconfig,
		"--wait", "--timeout", o.HelmTimeout.String()}
	if o.ChartVersion != "" {
		args = append(args, "--version", o.ChartVersion)
	}
	for _, f := range o.HelmValuesFiles {
		args = append(args, "-f", f)
	}
	for _, s := range o.HelmSet {
		args = append(args, "--set", s)
	}
	return args
}

func helmInstall(ctx context.Context, helm string, o Options, kubeconfig string) error {
	args := HelmArgs(o, kubeconfig)
	o.logf("kind: helm %s", strings.Join(args, " "))
	hctx, cancel := context.WithTimeout(ctx, o.HelmTimeout+time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(hctx, helm, args...)
	cmd.Stdout, cmd.Stderr = nil, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kind: helm install of %s failed: %s; rerun by hand: helm %s", o.Chart, lastLine(stderr.String(), err), strings.Join(args, " "))
	}
	return nil
}

// lastLine is the most telling line of a tool's stderr (the last non-empty
// one), or the exit error.
func lastLine(s string, err error) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return err.Error()
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func orDefault(s string) string {
	if s == "" {
		return "kind's default"
	}
	return s
}
