package bundle

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/report"
)

func sampleReport() *report.Report {
	return &report.Report{
		SchemaVersion: report.SchemaVersion,
		Suite:         "Routing conformance",
		Headline:      "Routing conformance on the simulator: 2 passed, 0 failed, 0 skipped — not a GPU qualification",
		Outcome:       report.OutcomePassed,
		Result:        report.ResultPass,
		Pairs:         []string{"vllm-router+vLLM"},
		Claims: []report.ClaimTable{{Name: "affinity", Title: "Prefix affinity", Anchor: "claim-affinity",
			Sources: []string{"docs/operator.md#measured-routing-behaviour"},
			Rows:    []report.ClaimRow{{Pair: "vllm-router+vLLM", Anchor: "claim-affinity--vllm-router-vllm", Result: report.ResultPass}}}},
		Verdicts: []report.Verdict{{Pair: "vllm-router+vLLM", Result: report.ResultPass, Line: "vllm-router+vLLM: PASS: all 1 applicable claims passed"}},
		Specs:    []report.SpecResult{{Name: "vllm-router+vLLM affinity", Result: report.ResultPass}},
	}
}

// untar reads a bundle into name -> content.
func untar(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			out[h.Name] = string(b)
		}
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestBundleHoldsTheReportEvidenceConfigDocsAndVerdicts(t *testing.T) {
	root := t.TempDir()
	art := filepath.Join(root, "artifacts", "qualification-v0.9.0")
	write(t, filepath.Join(art, "report.json"), `{"stale": true}`) // rendered anew
	write(t, filepath.Join(art, "ginkgo-report.json"), `[]`)
	write(t, filepath.Join(art, "affinity-sglang", "logs", "router.log"), "router exited 2\n")
	write(t, filepath.Join(root, "e2e.yaml"), "target: sim\n")
	write(t, filepath.Join(root, "docs/operator.md"), "# Operator\n")
	write(t, filepath.Join(root, "docs", "doc.go"), "package docs\n")
	r := sampleReport()
	r.SetLinkBase(art, root) // the artifacts' own pages link ../../docs/
	out := filepath.Join(root, "artifacts", Name("v0.9.0"))
	m, err := Write(out, Options{Version: "v0.9.0", Dir: art, Report: r, ConfigFile: filepath.Join(root, "e2e.yaml"),
		DocsDir: filepath.Join(root, "docs"), Env: []string{"E2E_TARGET=sim", "HF_TOKEN=hf_abc", "GINKGO_NODES=2"},
		Now: func() time.Time { return time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	files := untar(t, out)
	top := "qualification-v0.9.0/"
	for _, name := range []string{"bundle.json", "verdict.txt", "report.json", "qualification.md", "qualification.html", "junit.xml",
		"ginkgo-report.json", "affinity-sglang/logs/router.log", "config/e2e.yaml", "config/environment.txt", "docs/operator.md"} {
		if _, ok := files[top+name]; !ok {
			t.Errorf("bundle lacks %s", name)
		}
	}
	if _, ok := files[top+"docs/doc.go"]; ok {
		t.Error("bundle carries docs/ code, not only its pages")
	}
	if strings.Contains(files[top+"report.json"], "stale") || !strings.Contains(files[top+"report.json"], r.Headline) {
		t.Error("report.json is not this report")
	}
	// Inside the bundle the pages link to the bundle's own docs/.
	if html := files[top+"qualification.html"]; !strings.Contains(html, `href="docs/operator.md#measured-routing-behaviour"`) || strings.Contains(html, "../") {
		t.Error("the bundle's page does not link into the bundle's docs/")
	}
	if v := files[top+"verdict.txt"]; !strings.HasPrefix(v, r.Headline+"\n\n") || !strings.Contains(v, "vllm-router+vLLM: PASS: all 1 applicable claims passed\n") {
		t.Errorf("verdict.txt:\n%s", v)
	}
	if env := files[top+"config/environment.txt"]; !strings.Contains(env, "HF_TOKEN=<redacted>") || strings.Contains(env, "hf_abc") || !strings.Contains(env, "E2E_TARGET=sim") {
		t.Errorf("environment.txt:\n%s", env)
	}
	var manifest Manifest
	if err := json.Unmarshal([]byte(files[top+"bundle.json"]), &manifest); err != nil {
		t.Fatal(err)
	}
	if manifest.OperatorVersion != "v0.9.0" || manifest.ReportSchemaVersion != report.SchemaVersion || len(manifest.Files) != len(m.Files) || len(manifest.Files) != len(files)-1 {
		t.Errorf("manifest %+v", manifest)
	}
	for _, f := range manifest.Files {
		sum := sha256.Sum256([]byte(files[top+f.Name]))
		if hex.EncodeToString(sum[:]) != f.SHA256 {
			t.Errorf("%s: sha256 differs from the manifest", f.Name)
		}
	}
	back, err := ReadReport(out)
	if err != nil || back.Headline != r.Headline || len(back.Verdicts) != 1 {
		t.Errorf("reading the bundle back: %v %+v", err, back)
	}
}

func TestABaselineOfAnotherSchemaIsRefused(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "qualification-v0.8.0.tar.gz")
	f, err := os.Create(old)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeTarGz(f, "qualification-v0.8.0", []string{"report.json"}, map[string][]byte{"report.json": []byte(`{"result":"PASS","specs":[]}`)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = ReadReport(old)
	var se *report.SchemaError
	if !errors.As(err, &se) || se.Version != 0 {
		t.Fatalf("want a schema error, got %v", err)
	}
	for _, want := range []string{old, "no schemaVersion", "reads schemaVersion 2 only", "make qualify"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

func TestReadReportRefusesWhatIsNotABundle(t *testing.T) {
	dir := t.TempDir()
	notGz := filepath.Join(dir, "x.tar.gz")
	write(t, notGz, "plain text")
	if _, err := ReadReport(notGz); err == nil || !strings.Contains(err.Error(), "not a qualification bundle") {
		t.Errorf("plain file: %v", err)
	}
	empty := filepath.Join(dir, "empty.tar.gz")
	f, _ := os.Create(empty)
	writeTarGz(f, "qualification-x", []string{"verdict.txt"}, map[string][]byte{"verdict.txt": []byte("x")}, time.Now())
	f.Close()
	if _, err := ReadReport(empty); err == nil || !strings.Contains(err.Error(), "holds no report.json") {
		t.Errorf("bundle without a report: %v", err)
	}
	if _, err := ReadReport(filepath.Join(dir, "missing.tar.gz")); err == nil {
		t.Error("a missing baseline was accepted")
	}
}

func TestCheckVersion(t *testing.T) {
	for _, ok := range []string{"v0.9.0", "0.9.0-rc.1", "v1.0.0+build.5"} {
		if err := CheckVersion(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "../x", "v 1", "a/b"} {
		if err := CheckVersion(bad); err == nil || !strings.Contains(err.Error(), "VERSION") {
			t.Errorf("%q accepted: %v", bad, err)
		}
	}
}
