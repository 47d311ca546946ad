// Package bundle writes and reads qualification bundles: one .tar.gz per
// qualified operator version holding the report (HTML, Markdown, JSON,
// JUnit), the evidence of every failed spec, the config the run used, the
// docs the report links to, a verdict line per pair, and a manifest with
// every file's SHA-256. make qualify writes one; BASELINE= reads one back
// to compare against.
package bundle

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gpustack/routing-conformance/report"
)

// File names inside a bundle, under its top folder qualification-<version>/.
const (
	FileManifest = "bundle.json"
	FileVerdict  = "verdict.txt"
	DirConfig    = "config"
	DirDocs      = "docs"
	FileEnv      = "environment.txt"
)

// ManifestVersion is the version of bundle.json's shape.
const ManifestVersion = 1

// Manifest is bundle.json.
type Manifest struct {
	ManifestVersion     int       `json:"manifestVersion"`
	ReportSchemaVersion int       `json:"reportSchemaVersion"`
	OperatorVersion     string    `json:"operatorVersion"`
	Created             time.Time `json:"created"`
	Headline            string    `json:"headline"`
	Verdicts            []string  `json:"verdicts"`
	Baseline            string    `json:"baseline,omitempty"`
	Files               []File    `json:"files"`
}

// File is one file of the bundle.
type File struct {
	Name   string `json:"name"`
	Size   int    `json:"size"`
	SHA256 string `json:"sha256"`
}

// Options say what goes into a bundle.
type Options struct {
	// Version is the operator version qualified (make qualify VERSION=).
	Version string
	// Dir is the run's artifacts directory: every file in it is evidence.
	Dir string
	// Report is the run's report; its files are rendered anew in the
	// bundle, with docs/ links into the bundle's own docs/.
	Report *report.Report
	// ConfigFile is the e2e.yaml the run read; DocsDir the repository's docs/.
	ConfigFile string
	DocsDir    string
	// Env are the run's settings as NAME=value (E2E_*, GINKGO_*, ...).
	Env []string
	// Now stamps the manifest (default time.Now).
	Now func() time.Time
}

var versionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,62}$`)

// CheckVersion refuses a version that cannot name a file.
func CheckVersion(v string) error {
	if !versionRE.MatchString(v) {
		return fmt.Errorf("VERSION %q must be an operator version such as v0.9.0 (letters, digits, '.', '_', '+', '-'; it names the bundle)", v)
	}
	return nil
}

// Name is the bundle's file name for a version.
func Name(version string) string { return "qualification-" + version + ".tar.gz" }

// Write writes the bundle to path (atomically: a temp file renamed).
func Write(path string, o Options) (*Manifest, error) {
	if err := CheckVersion(o.Version); err != nil {
		return nil, err
	}
	if o.Report == nil {
		return nil, errors.New("bundle: no report to bundle")
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	files, err := contents(o)
	if err != nil {
		return nil, err
	}
	m := &Manifest{ManifestVersion: ManifestVersion, ReportSchemaVersion: o.Report.SchemaVersion, OperatorVersion: o.Version,
		Created: now().UTC(), Headline: o.Report.Headline}
	for _, v := range o.Report.Verdicts {
		m.Verdicts = append(m.Verdicts, v.Line)
	}
	if o.Report.Baseline != nil {
		m.Baseline = o.Report.Baseline.Baseline
	}
	names := slices.Sorted(maps.Keys(files))
	for _, n := range names {
		sum := sha256.Sum256(files[n])
		m.Files = append(m.Files, File{Name: n, Size: len(files[n]), SHA256: hex.EncodeToString(sum[:])})
	}
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	files[FileManifest] = append(mj, '\n')
	names = append([]string{FileManifest}, names...)

	tmp, err := os.CreateTemp(filepath.Dir(path), ".bundle-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if err := writeTarGz(tmp, "qualification-"+o.Version, names, files, m.Created); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	// CreateTemp makes it private; a bundle is for handing round.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return nil, err
	}
	return m, os.Rename(tmp.Name(), path)
}

// contents are the bundle's files by name (relative to its top folder).
func contents(o Options) (map[string][]byte, error) {
	files := map[string][]byte{}
	rendered := map[string]bool{}
	// The report, rendered again from report.json for pages inside the
	// bundle: docs/ links point at the bundle's own docs/.
	tmp, err := os.MkdirTemp("", "bundle-report-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	r := *o.Report
	r.SetLinkBase(tmp, tmp)
	written, err := report.Render(tmp, &r)
	if err != nil {
		return nil, err
	}
	for _, p := range written {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		files[filepath.Base(p)] = b
		rendered[filepath.Base(p)] = true
	}
	// The evidence: every regular file of the run's artifacts.
	if o.Dir != "" {
		err := filepath.WalkDir(o.Dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			rel, err := filepath.Rel(o.Dir, p)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if rendered[rel] {
				return nil
			}
			b, err := os.ReadFile(p)
			files[rel] = b
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("bundle: reading the artifacts %s: %w", o.Dir, err)
		}
	}
	if o.ConfigFile != "" {
		b, err := os.ReadFile(o.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("bundle: the config used: %w", err)
		}
		files[path.Join(DirConfig, filepath.Base(o.ConfigFile))] = b
	}
	files[path.Join(DirConfig, FileEnv)] = []byte(environment(o.Env))
	if o.DocsDir != "" {
		entries, err := os.ReadDir(o.DocsDir)
		if err != nil {
			return nil, fmt.Errorf("bundle: the docs the report links to: %w", err)
		}
		for _, e := range entries {
			if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".md") {
				b, err := os.ReadFile(filepath.Join(o.DocsDir, e.Name()))
				if err != nil {
					return nil, err
				}
				files[path.Join(DirDocs, e.Name())] = b
			}
		}
	}
	var v strings.Builder
	fmt.Fprintf(&v, "%s\n\n", o.Report.Headline)
	for _, vd := range o.Report.Verdicts {
		fmt.Fprintln(&v, vd.Line)
	}
	files[FileVerdict] = []byte(v.String())
	return files, nil
}

// secretName matches settings whose values are never written down.
var secretName = regexp.MustCompile(`(?i)(token|secret|password|passwd|api_?key|credential)`)

// environment is the run's settings, one NAME=value a line, sorted, with
// credentials' values redacted.
func environment(env []string) string {
	var lines []string
	for _, kv := range env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if secretName.MatchString(name) {
			kv = name + "=<redacted>"
		}
		lines = append(lines, kv)
	}
	slices.Sort(lines)
	return "# The settings of the run (environment overrides of the config file)\n" + strings.Join(lines, "\n") + "\n"
}

func writeTarGz(w io.Writer, top string, names []string, files map[string][]byte, mod time.Time) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	dirs := map[string]bool{}
	for _, n := range names {
		full := path.Join(top, n)
		for d := path.Dir(full); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mod}); err != nil {
			return err
		}
	}
	for _, n := range names {
		b := files[n]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path.Join(top, n), Mode: 0o644, Size: int64(len(b)), ModTime: mod}); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// ReadReport reads the report of a bundle (or a report.json itself), of
// this build's schema version: a baseline of another schema is refused
// with report.SchemaError, saying what to do.
func ReadReport(p string) (*report.Report, error) {
	if strings.HasSuffix(p, ".json") {
		return report.Load(p)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("baseline %s is not a qualification bundle (.tar.gz from make qualify): %w", p, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("baseline %s holds no report.json: it is not a qualification bundle from make qualify", p)
		}
		if err != nil {
			return nil, fmt.Errorf("baseline %s: %w", p, err)
		}
		// qualification-<version>/report.json, one level down.
		if h.Typeflag == tar.TypeReg && path.Base(h.Name) == report.FileJSON && strings.Count(strings.Trim(h.Name, "/"), "/") == 1 {
			b, err := io.ReadAll(io.LimitReader(tr, 64<<20))
			if err != nil {
				return nil, fmt.Errorf("baseline %s: %w", p, err)
			}
			return report.Parse(p+": "+h.Name, b)
		}
	}
}
