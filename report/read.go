package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// The one reader of report.json: every program that reads a run's report
// (the baseline diff and the bundle, make e2e's summary, make repeat,
// hack/gpucheck, hack/eppdiff, the apiserver tier's comparison) reads it
// with Load or Parse, so a report of another schema version is refused in
// one way, naming the file and what to do.

// SchemaError is a report.json whose schema version this build does not
// read.
type SchemaError struct {
	Path    string
	Version int
}

func (e *SchemaError) Error() string {
	had := fmt.Sprintf("schemaVersion %d", e.Version)
	if e.Version == 0 {
		had = "no schemaVersion (written before report schemas were versioned)"
	}
	return fmt.Sprintf("%s has %s; this build reads schemaVersion %d only: produce it again with this version of the suite (make e2e, make qualify), or read it with the commit that wrote it",
		e.Path, had, SchemaVersion)
}

// Parse reads a report.json of this schema version; name is used in errors.
// Fields it does not know are ignored: within a schema version the report
// only grows.
func Parse(name string, data []byte) (*Report, error) {
	var head struct {
		SchemaVersion int `json:"schemaVersion"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("%s is not a readable %s: %w", name, FileJSON, err)
	}
	if head.SchemaVersion != SchemaVersion {
		return nil, &SchemaError{Path: name, Version: head.SchemaVersion}
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s is not a readable %s: %w", name, FileJSON, err)
	}
	return &r, nil
}

// Load reads report.json from path (see Parse). A missing file is an error
// that says why a run leaves none (errors.Is fs.ErrNotExist still holds).
func Load(path string) (*Report, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: the suite writes %s into its artifacts directory when it ends, so a run that stopped before that left none", err, FileJSON)
	}
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}
