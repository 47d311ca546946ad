package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The table is consistent: one row a variable, a setting row sets a field
// and every other row says what it is for.
func TestEveryOverrideRowIsWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, o := range Overrides() {
		if seen[o.Env] {
			t.Errorf("%s is listed twice", o.Env)
		}
		seen[o.Env] = true
		if o.Help == "" {
			t.Errorf("%s has no help", o.Env)
		}
		switch o.use() {
		case UseSetting:
			if o.Field == "" || o.set == nil {
				t.Errorf("%s is a setting but sets no field", o.Env)
			}
		case UseEnvOnly, UseTestOnly, UseInternal:
			if o.Field != "" {
				t.Errorf("%s (%s) names field %s, which the file would set", o.Env, o.Use, o.Field)
			}
		default:
			t.Errorf("%s: unknown use %q", o.Env, o.Use)
		}
	}
}

// e2eName is an E2E_* variable as code and scripts spell it.
var e2eName = regexp.MustCompile(`\bE2E_[A-Z0-9_]*[A-Z0-9]\b`)

// Every E2E_* variable the repository's Go code and scripts name is a row
// of the table: a knob read or set anywhere else is one the table, the
// README's list and make e2e's bundle would not know.
func TestEveryE2EVariableIsARowOfTheTable(t *testing.T) {
	rows := map[string]bool{}
	for _, o := range Overrides() {
		rows[o.Env] = true
	}
	root := filepath.Join("..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// This package's tests name variables that are not knobs; the
			// dot folders hold builds and artifacts.
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "artifacts" || name == "bin" || path == filepath.Join(root, "config")) {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".go" && ext != ".sh" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, name := range e2eName.FindAllString(string(b), -1) {
			if !rows[name] {
				t.Errorf("%s names %s, which is no row of config.Overrides", path, name)
				rows[name] = true // once
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestBuildDirectoriesAreSettingsWithRelativePathsResolved(t *testing.T) {
	c, err := parse(t, "sim:\n  routersDir: builds/routers\n", envMap(map[string]string{EnvLLMDDir: "/abs/llmd"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Sim.RoutersDir != "/cfg/builds/routers" || c.Sim.LLMDDir != "/abs/llmd" {
		t.Errorf("routersDir %q, llmdDir %q", c.Sim.RoutersDir, c.Sim.LLMDDir)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	c, err = parse(t, "", envMap(map[string]string{EnvRoutersDir: "next"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Sim.RoutersDir != filepath.Join(wd, "next") || c.Sim.LLMDDir != "" {
		t.Errorf("from the environment: routersDir %q (want it from the working directory), llmdDir %q (want the default, empty)", c.Sim.RoutersDir, c.Sim.LLMDDir)
	}
	if got := c.Origin("sim.routersDir"); got != EnvRoutersDir {
		t.Errorf("Origin = %q", got)
	}
}

func TestTheTestOnlySwitchIsSetFromTheEnvironmentOnly(t *testing.T) {
	mustFail(t, "sim:\n  testOnlyReplaceEnginesOnRouterEdit: true\n", noEnv, "sim.testOnlyReplaceEnginesOnRouterEdit is not a known field")
	c, err := parse(t, "", envMap(map[string]string{EnvTestOnlyReplaceEngines: "1"}))
	if err != nil || !c.Sim.TestOnlyReplaceEnginesOnRouterEdit {
		t.Fatalf("%v, %+v", err, c)
	}
	mustFail(t, "", envMap(map[string]string{EnvTestOnlyReplaceEngines: "maybe"}), EnvTestOnlyReplaceEngines+`: expected true or false, got "maybe"`)
}

func TestIsolatedReadsE2E_ISOLATE(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "1": true, "true": true} {
		got, err := Isolated(envMap(map[string]string{EnvIsolate: v}))
		if err != nil || got != want {
			t.Errorf("%s=%q: %v, %v", EnvIsolate, v, got, err)
		}
	}
	if _, err := Isolated(envMap(map[string]string{EnvIsolate: "yes"})); err == nil || !strings.Contains(err.Error(), EnvIsolate+`: expected true or false, got "yes"`) {
		t.Errorf("a bad value: %v", err)
	}
	// Load does not apply an environment-only row.
	if _, err := parse(t, "", envMap(map[string]string{EnvIsolate: "yes"})); err != nil {
		t.Errorf("Load read %s: %v", EnvIsolate, err)
	}
}

func TestOverridesTableListsEveryRow(t *testing.T) {
	table := OverridesTable()
	for _, o := range Overrides() {
		if !strings.Contains(table, "| `"+o.Env+"` |") {
			t.Errorf("the table lacks %s", o.Env)
		}
	}
	if !strings.Contains(table, "| `E2E_PROGRESS_FIFO` | (internal) |") || !strings.Contains(table, "| `E2E_ROUTERS_DIR` | `sim.routersDir` |") {
		t.Errorf("table:\n%s", table)
	}
}
