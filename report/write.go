package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/onsi/ginkgo/v2/reporters"
	"github.com/onsi/ginkgo/v2/types"
)

// File names written under the artifacts directory.
const (
	FileJUnit    = "junit.xml"
	FileJSON     = "report.json"
	FileMarkdown = "qualification.md"
	FileHTML     = "qualification.html"
)

// Write builds the report and writes the four files under dir. Call it from
// ReportAfterSuite, which runs once on process 1 over every process's specs.
// It writes what it can and returns every error joined.
func Write(dir string, r types.Report, meta Meta) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: artifacts directory %s: %w", dir, err)
	}
	var written []string
	var errs []error
	junit := filepath.Join(dir, FileJUnit)
	if err := reporters.GenerateJUnitReport(r, junit); err != nil {
		errs = append(errs, fmt.Errorf("report: %s: %w", junit, err))
	} else {
		written = append(written, junit)
	}
	q, err := Build(r, meta)
	if err != nil {
		return written, errors.Join(append(errs, err)...)
	}
	js, err := json.MarshalIndent(q, "", "  ")
	if err != nil {
		return written, errors.Join(append(errs, fmt.Errorf("report: encoding %s: %w", FileJSON, err))...)
	}
	page, err := HTML(q)
	if err != nil {
		errs = append(errs, fmt.Errorf("report: rendering %s: %w", FileHTML, err))
	}
	files := []struct {
		name string
		data []byte
	}{{FileJSON, append(js, '\n')}, {FileMarkdown, []byte(Markdown(q))}}
	if page != "" {
		files = append(files, struct {
			name string
			data []byte
		}{FileHTML, []byte(page)})
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
