package workflowlint

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
)

// repoRoot is the module root: two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	return root
}

// lint runs actionlint over dir/.github/workflows with dir/.github's
// actionlint.yaml, and shellcheck on run: scripts when it is on PATH.
func lint(t *testing.T, dir string) []*actionlint.Error {
	t.Helper()
	opts := &actionlint.LinterOptions{LogWriter: os.Stderr}
	if sc, err := exec.LookPath("shellcheck"); err == nil {
		opts.Shellcheck = sc
	} else {
		t.Log("shellcheck is not on PATH: run: scripts are not shellchecked")
	}
	var out bytes.Buffer
	l, err := actionlint.NewLinter(&out, opts)
	if err != nil {
		t.Fatal(err)
	}
	// NewProject, not LintRepository: a project needs no .git directory
	// then, so the test also runs on an exported tree.
	p, err := actionlint.NewProject(dir)
	if err != nil {
		t.Fatalf("reading %s/.github/actionlint.yaml: %v", dir, err)
	}
	errs, err := l.LintDir(p.WorkflowsDir(), p)
	if err != nil {
		t.Fatal(err)
	}
	if out.Len() > 0 {
		t.Logf("actionlint:\n%s", out.String())
	}
	return errs
}

func TestWorkflowsPassActionlint(t *testing.T) {
	for _, e := range lint(t, repoRoot(t)) {
		t.Errorf("%s:%d:%d: %s [%s]", e.Filepath, e.Line, e.Column, e.Message, e.Kind)
	}
}

// TestActionlintCatchesBrokenWorkflows proves the lint above can fail: each
// broken workflow, linted with the project's config, yields the error kind
// named.
func TestActionlintCatchesBrokenWorkflows(t *testing.T) {
	cfg, err := os.ReadFile(filepath.Join(repoRoot(t), ".github", "actionlint.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const head = "name: broken\non: [push]\njobs:\n  j:\n"
	cases := map[string]struct{ body, kind string }{
		"unknown runner label": {head + "    runs-on: [self-hosted, gpux]\n    steps:\n      - run: make test\n", "runner-label"},
		"undefined context":    {head + "    runs-on: ubuntu-24.04\n    steps:\n      - run: echo ${{ github.no_such_field }}\n", "expression"},
		"unknown action input": {head + "    runs-on: ubuntu-24.04\n    steps:\n      - uses: actions/setup-go@v6\n        with:\n          go-versoin-file: go.mod\n", "action"},
		"no runs-on":           {head + "    steps:\n      - run: make test\n", "syntax-check"},
		"unknown input ref":    {"name: broken\non:\n  workflow_dispatch:\n    inputs:\n      nodes: {type: number}\njobs:\n  j:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo ${{ inputs.node }}\n", "expression"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			wf := filepath.Join(dir, ".github", "workflows")
			if err := os.MkdirAll(wf, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, ".github", "actionlint.yaml"), cfg, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(wf, "broken.yml"), []byte(c.body), 0o644); err != nil {
				t.Fatal(err)
			}
			errs := lint(t, dir)
			var kinds []string
			for _, e := range errs {
				kinds = append(kinds, e.Kind)
			}
			if !slices.Contains(kinds, c.kind) {
				t.Errorf("want a %q error, got %d errors of kinds %v", c.kind, len(errs), kinds)
			}
		})
	}
}

// parse reads one of the project's workflows into actionlint's syntax tree.
func parse(t *testing.T, name string) *actionlint.Workflow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), ".github", "workflows", name))
	if err != nil {
		t.Fatal(err)
	}
	w, errs := actionlint.Parse(b)
	for _, e := range errs {
		t.Errorf("%s:%d: %s", name, e.Line, e.Message)
	}
	if w == nil {
		t.Fatalf("%s did not parse", name)
	}
	return w
}

func events(w *actionlint.Workflow) map[string]actionlint.Event {
	m := map[string]actionlint.Event{}
	for _, e := range w.On {
		m[e.EventName()] = e
	}
	return m
}

func onlyJob(t *testing.T, w *actionlint.Workflow) *actionlint.Job {
	t.Helper()
	if len(w.Jobs) != 1 {
		t.Fatalf("want one job, got %d", len(w.Jobs))
	}
	for _, j := range w.Jobs {
		return j
	}
	return nil
}

// job is the workflow's job with id, or fails t.
func job(t *testing.T, w *actionlint.Workflow, id string) *actionlint.Job {
	t.Helper()
	j, ok := w.Jobs[id]
	if !ok {
		t.Fatalf("no job %q", id)
	}
	return j
}

func labels(j *actionlint.Job) []string {
	var out []string
	if j.RunsOn != nil {
		for _, l := range j.RunsOn.Labels {
			out = append(out, l.Value)
		}
	}
	return out
}

// findStep returns the first step whose run: script or uses: contains s.
func findStep(j *actionlint.Job, s string) *actionlint.Step {
	for _, st := range j.Steps {
		switch e := st.Exec.(type) {
		case *actionlint.ExecRun:
			if e.Run != nil && strings.Contains(e.Run.Value, s) {
				return st
			}
		case *actionlint.ExecAction:
			if e.Uses != nil && strings.Contains(e.Uses.Value, s) {
				return st
			}
		}
	}
	return nil
}

func runsAlways(st *actionlint.Step) bool {
	return st != nil && st.If != nil && strings.Contains(st.If.Value, "always()")
}

func TestCIRunsMakeTestOnPushAndPullRequest(t *testing.T) {
	w := parse(t, "ci.yml")
	ev := events(w)
	for _, name := range []string{"push", "pull_request"} {
		if _, ok := ev[name]; !ok {
			t.Errorf("ci.yml does not run on %s", name)
		}
	}
	j := jobRunning(t, w, `\bmake test(\s|$)`)
	if l := labels(j); len(l) != 1 || !strings.HasPrefix(l[0], "ubuntu-") {
		t.Errorf("ci.yml runs-on %v, want one GitHub-hosted ubuntu runner", l)
	}
	if findStep(j, "make test") == nil {
		t.Error("ci.yml has no step running make test")
	}
	// make test builds the routers itself; the job builds them in a step of
	// their own first, with the build cached between runs.
	if in, test := stepIndex(j, "make routers"), stepIndex(j, "make test"); in < 0 || in > test {
		t.Error("ci.yml's test job does not build the routers before make test")
	}
	if c := findStep(j, "actions/cache@"); c == nil || !strings.Contains(c.Exec.(*actionlint.ExecAction).Inputs["path"].Value.Value, ".cache/routing-conformance/routers") {
		t.Error("ci.yml's test job does not cache the routers' build")
	}
	goStep := findStep(j, "actions/setup-go@")
	if goStep == nil {
		t.Fatal("ci.yml does not set up Go")
	}
	with := goStep.Exec.(*actionlint.ExecAction).Inputs
	if in := with["go-version-file"]; in == nil || in.Value.Value != "go.mod" {
		t.Error("ci.yml takes the Go version from somewhere other than go.mod")
	}
	if in := with["cache"]; in == nil || in.Value.Value != "true" {
		t.Error("ci.yml does not cache modules and builds")
	}
}

// The apiserver tier runs in ci.yml as a job of its own, as root through the
// hosted runner's sudo with the Go environment and CI=true handed over
// (sudo -E), and uploads its reports and log when it fails.
func TestCIRunsTheAPIServerTierAsRoot(t *testing.T) {
	w := parse(t, "ci.yml")
	j := jobRunning(t, w, `\bmake test-apiserver\b`)
	if l := labels(j); len(l) != 1 || !strings.HasPrefix(l[0], "ubuntu-") {
		t.Errorf("the apiserver job runs-on %v, want one GitHub-hosted ubuntu runner (passwordless sudo)", l)
	}
	script := findStep(j, "make test-apiserver").Exec.(*actionlint.ExecRun).Run.Value
	for _, want := range []string{"sudo -E ", `"PATH=$PATH"`, "GOCACHE=", "GOMODCACHE=", "set -o pipefail"} {
		if !strings.Contains(script, want) {
			t.Errorf("the make test-apiserver step lacks %q:\n%s", want, script)
		}
	}
	if strings.Contains(script, "CI=") || strings.Contains(script, "|| true") {
		t.Errorf("the step overrides CI or its status: a skipped tier must fail the job:\n%s", script)
	}
	if findStep(j, "actions/setup-go@") == nil || findStep(j, "cd test/apiserver && go mod download") == nil {
		t.Error("the apiserver job does not set up Go and the tier's modules")
	}
	up := findStep(j, "actions/upload-artifact@")
	if up == nil || up.If == nil || !strings.Contains(up.If.Value, "failure()") {
		t.Error("the apiserver job does not upload its evidence when it fails")
	}
}

// jobRunning is the one job with a run: step whose script matches pattern.
func jobRunning(t *testing.T, w *actionlint.Workflow, pattern string) *actionlint.Job {
	t.Helper()
	re := regexp.MustCompile(pattern)
	var found []*actionlint.Job
	for _, j := range w.Jobs {
		if slices.ContainsFunc(j.Steps, func(st *actionlint.Step) bool {
			run, ok := st.Exec.(*actionlint.ExecRun)
			return ok && run.Run != nil && re.MatchString(run.Run.Value)
		}) {
			found = append(found, j)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d jobs run %s, want one", len(found), pattern)
	}
	return found[0]
}

// stepIndex is the index of the first step whose run: script is exactly
// cmd, or -1.
func stepIndex(j *actionlint.Job, cmd string) int {
	for i, st := range j.Steps {
		if e, ok := st.Exec.(*actionlint.ExecRun); ok && e.Run != nil && strings.TrimSpace(e.Run.Value) == cmd {
			return i
		}
	}
	return -1
}

func TestNightlyQualifiesOnAGPURunner(t *testing.T) {
	w := parse(t, "nightly.yml")
	ev := events(w)
	if _, ok := ev["schedule"]; !ok {
		t.Error("nightly.yml has no schedule")
	}
	d, ok := ev["workflow_dispatch"].(*actionlint.WorkflowDispatchEvent)
	if !ok {
		t.Fatal("nightly.yml cannot be dispatched by hand")
	}
	for _, in := range []string{"label_filter", "nodes"} {
		if _, ok := d.Inputs[in]; !ok {
			t.Errorf("workflow_dispatch has no %q input", in)
		}
	}
	j := onlyJob(t, w)
	if l := labels(j); !slices.Equal(l, []string{"self-hosted", "gpu"}) {
		t.Errorf("nightly runs-on %v, want [self-hosted gpu]", l)
	}

	kc := findStep(j, "E2E_KUBECONFIG=")
	if kc == nil || kc.Env == nil || !strings.Contains(envValue(kc, "KUBECONFIG_CONTENT"), "secrets.") {
		t.Error("no step writes the kubeconfig from a secret into E2E_KUBECONFIG")
	}
	suite := findStep(j, "make e2e")
	if suite == nil {
		t.Fatal("nightly does not run make e2e")
	}
	script := suite.Exec.(*actionlint.ExecRun).Run.Value
	for _, s := range []string{"E2E_TARGET=kube", "GINKGO_LABEL_FILTER=", "GINKGO_NODES="} {
		if !strings.Contains(script, s) {
			t.Errorf("make e2e step does not pass %s", s)
		}
	}
	if !strings.Contains(envValue(suite, "LABEL_FILTER"), "inputs.label_filter") || !strings.Contains(envValue(suite, "NODES"), "inputs.nodes") {
		t.Error("make e2e step does not take the label filter and node count from the dispatch inputs")
	}
	if st := findStep(j, "./hack/gpucheck"); !runsAlways(st) {
		t.Error("no step runs hack/gpucheck whatever the suite's outcome: a run of capacity skips would pass")
	}
	if st := findStep(j, "GITHUB_STEP_SUMMARY"); !runsAlways(st) || !strings.Contains(st.Exec.(*actionlint.ExecRun).Run.Value, "qualification.md") {
		t.Error("no step always appends qualification.md to the job summary")
	}
	if st := findStep(j, "actions/upload-artifact@"); !runsAlways(st) {
		t.Error("artifacts are not uploaded on failure")
	}
}

func envValue(st *actionlint.Step, name string) string {
	if st.Env == nil {
		return ""
	}
	if v, ok := st.Env.Vars[strings.ToLower(name)]; ok && v.Value != nil {
		return v.Value.Value
	}
	return ""
}
