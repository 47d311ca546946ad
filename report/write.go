package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/onsi/ginkgo/v2/types"
)

// File names written under the artifacts directory.
const (
	FileJUnit    = "junit.xml"
	FileJSON     = "report.json"
	FileMarkdown = "qualification.md"
	FileHTML     = "qualification.html"
	// FileConfig is the config the run used, after environment overrides.
	FileConfig = "config-used.json"
)

// Write builds the report and writes the four files under dir. Call it from
// ReportAfterSuite, which runs once on process 1 over every process's specs.
// It writes what it can and returns every error joined.
func Write(dir string, r types.Report, meta Meta) ([]string, error) {
	q, err := Build(r, meta)
	if err != nil {
		return nil, err
	}
	q.attachDriverOverhead(readDriverOverhead())
	if meta.RepoRoot != "" {
		q.SetLinkBase(dir, meta.RepoRoot)
	}
	written, err := Render(dir, q)
	if meta.Config != nil {
		path := filepath.Join(dir, FileConfig)
		b, jerr := json.MarshalIndent(meta.Config, "", "  ")
		if jerr == nil {
			jerr = os.WriteFile(path, append(b, '\n'), 0o644)
		}
		if jerr != nil {
			return written, errors.Join(err, fmt.Errorf("report: %s: %w", path, jerr))
		}
		written = append(written, path)
	}
	return written, err
}

// SetLinkBase makes the docs/ links of pages written in dir point into the
// repository at root.
func (r *Report) SetLinkBase(dir, root string) {
	absDir, err1 := filepath.Abs(dir)
	absRoot, err2 := filepath.Abs(root)
	if err1 != nil || err2 != nil {
		return
	}
	rel, err := filepath.Rel(absDir, absRoot)
	if err != nil {
		return
	}
	if rel == "." {
		r.linkBase = ""
		return
	}
	r.linkBase = filepath.ToSlash(rel) + "/"
}

// Render writes report.json, qualification.md, qualification.html and
// junit.xml for r under dir, all from r, and returns the paths written.
func Render(dir string, r *Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: artifacts directory %s: %w", dir, err)
	}
	var written []string
	var errs []error
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("report: encoding %s: %w", FileJSON, err)
	}
	type file struct {
		name string
		data []byte
	}
	files := []file{{FileJSON, append(js, '\n')}, {FileMarkdown, []byte(Markdown(r))}}
	// One renderer's error costs only its own file.
	for _, render := range []struct {
		name string
		fn   func() ([]byte, error)
	}{
		{FileHTML, func() ([]byte, error) { page, err := HTML(r); return []byte(page), err }},
		{FileJUnit, func() ([]byte, error) { return JUnit(r) }},
	} {
		data, err := render.fn()
		if err != nil {
			errs = append(errs, fmt.Errorf("report: rendering %s: %w", render.name, err))
			continue
		}
		files = append(files, file{render.name, data})
	}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, f.data, 0o644); err != nil {
			errs = append(errs, fmt.Errorf("report: %w", err))
			continue
		}
		written = append(written, path)
	}
	return written, errors.Join(errs...)
}
