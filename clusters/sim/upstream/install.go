// Package upstream runs the routers' upstream Rust code, as published on
// PyPI, as the sim's router containers: vllm-router (vllm-project/router, a
// PyO3 extension with an argparse launcher) and sglang-router
// (sgl-model-gateway, a maturin library with an argparse launcher). The
// operator's image runs the same libraries behind clap binaries, which are
// not published; so a container's rendered argv is translated for the
// launcher by one table (Translations), each row named and justified, and
// whatever the table does not translate is the launcher's own front end.
//
// `make upstream-routers` (hack/upstream-routers.sh) installs the wheels,
// hash-checked against requirements.txt, into .upstream-routers/ and writes
// its manifest.json, which Load reads: which wheel files, versions and
// sha256 will run.
package upstream

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/gpustack/routing-conformance/api"
)

// EnvDir names another install directory than the module's .upstream-routers.
const EnvDir = "E2E_UPSTREAM_ROUTERS_DIR"

// DefaultDir is the install directory, relative to the module root.
const DefaultDir = ".upstream-routers"

// InstallCommand is what a user runs to install or repair the wheels.
const InstallCommand = "make upstream-routers"

// requirements is the hash-pinned requirements file the pinned install used;
// a manifest written from another one is stale.
//
//go:embed requirements.txt
var requirements []byte

// ErrNotInstalled is returned (wrapped) by Load when no install is there.
var ErrNotInstalled = errors.New("upstream routers are not installed")

// Wheel is one installed router wheel.
type Wheel struct {
	// Package is the PyPI name (vllm-router, sglang-router).
	Package string `json:"package"`
	// Module is the Python package whose launch_router module runs.
	Module  string `json:"module"`
	Version string `json:"version"`
	// File and SHA256 are the wheel file pip installed and its digest.
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
	// HashChecked: installed from requirements.txt in pip's hash-checking
	// mode. False when the user named another version.
	HashChecked bool `json:"hashChecked"`
}

// Install is one `make upstream-routers` install, as its manifest says.
type Install struct {
	// Dir is the install directory.
	Dir string `json:"-"`
	// Python is the virtual environment's interpreter.
	Python        string `json:"python"`
	PythonVersion string `json:"pythonVersion"`
	// RequirementsSHA256 is the digest of the requirements.txt a pinned
	// install used ("" for another version).
	RequirementsSHA256 string  `json:"requirementsSHA256"`
	Wheels             []Wheel `json:"wheels"`
	// TiktokenEncodingsBase holds o200k_base.tiktoken, which the SGLang
	// gateway's IGW mode loads at startup (see the harmony-vocab row).
	TiktokenEncodingsBase string `json:"tiktokenEncodingsBase"`
}

// packages maps the operator's router names to their PyPI packages.
var packages = map[string]string{
	api.RouterVLLM:   "vllm-router",
	api.RouterSGLang: "sglang-router",
}

// Routers are the routers an install can run, in api order.
func Routers() []string { return []string{api.RouterVLLM, api.RouterSGLang} }

// Supports reports whether router has upstream code this package runs
// (llm-d-router has none reachable here: docs/upstream-routers.md).
func Supports(router string) bool { _, ok := packages[router]; return ok }

// Dir is the install directory: $E2E_UPSTREAM_ROUTERS_DIR, else
// .upstream-routers in the module root found from the working directory.
func Dir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		return filepath.Abs(d)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil &&
			bytes.Contains(b, []byte("module github.com/gpustack/routing-conformance\n")) {
			return filepath.Join(d, DefaultDir), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("upstream routers: no go.mod of github.com/gpustack/routing-conformance above %s; set %s to the install directory", wd, EnvDir)
		}
	}
}

// Load reads the install in dir ("" is Dir()). Its errors say what to run.
func Load(dir string) (*Install, error) {
	if dir == "" {
		d, err := Dir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	manifest := filepath.Join(dir, "manifest.json")
	b, err := os.ReadFile(manifest)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s: run `%s` (installs vllm-router and sglang-router from PyPI, hash-checked)", ErrNotInstalled, dir, InstallCommand)
	}
	if err != nil {
		return nil, fmt.Errorf("upstream routers: %w", err)
	}
	in := &Install{Dir: dir}
	if err := json.Unmarshal(b, in); err != nil {
		return nil, fmt.Errorf("upstream routers: %s: %v; run `rm -rf %s && %s`", manifest, err, dir, InstallCommand)
	}
	if _, err := os.Stat(in.Python); err != nil {
		return nil, fmt.Errorf("upstream routers: %s names %s, which is missing (%v); run `rm -rf %s && %s`", manifest, in.Python, err, dir, InstallCommand)
	}
	if in.RequirementsSHA256 != "" && in.RequirementsSHA256 != RequirementsSHA256() {
		return nil, fmt.Errorf("upstream routers: %s was installed from another clusters/sim/upstream/requirements.txt (sha256 %s, this tree's is %s); run `%s`",
			dir, short(in.RequirementsSHA256), short(RequirementsSHA256()), InstallCommand)
	}
	if _, err := os.Stat(filepath.Join(in.TiktokenEncodingsBase, "o200k_base.tiktoken")); err != nil {
		return nil, fmt.Errorf("upstream routers: %s lacks the o200k_base vocab (%v); run `rm -rf %s && %s`", dir, err, dir, InstallCommand)
	}
	for _, r := range Routers() {
		if _, ok := in.Wheel(r); !ok {
			return nil, fmt.Errorf("upstream routers: %s lists no %s wheel; run `rm -rf %s && %s`", manifest, packages[r], dir, InstallCommand)
		}
	}
	return in, nil
}

// RequirementsSHA256 is the digest of this tree's requirements.txt.
func RequirementsSHA256() string {
	sum := sha256.Sum256(requirements)
	return hex.EncodeToString(sum[:])
}

// Wheel is the installed wheel that runs router.
func (in *Install) Wheel(router string) (Wheel, bool) {
	pkg, ok := packages[router]
	if !ok {
		return Wheel{}, false
	}
	i := slices.IndexFunc(in.Wheels, func(w Wheel) bool { return w.Package == pkg })
	if i < 0 {
		return Wheel{}, false
	}
	return in.Wheels[i], true
}

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}
