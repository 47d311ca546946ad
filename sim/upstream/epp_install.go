package upstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// DefaultEPPDir is make upstream-llmd's output, relative to the module root;
// a caller names another (LoadEPP's dir: the suite's sim.llmdDir).
const DefaultEPPDir = ".upstream-llmd"

// EPPInstallCommand is what a user runs to build llm-d-router's EPP; where
// the module proxy does not serve github.com/llm-d it needs checkouts of the
// two repositories (docs/upstream-llmd.md#how-to-build).
const EPPInstallCommand = "make upstream-llmd"

// ErrEPPNotInstalled is returned (wrapped) by LoadEPP when no build is there.
var ErrEPPNotInstalled = errors.New("llm-d-router's EPP is not built")

// EPPInstall is one make upstream-llmd result, as its manifest.json says
// (hack/upstream-llmd.sh writes it).
type EPPInstall struct {
	// Dir is the manifest directory.
	Dir    string `json:"-"`
	Binary string `json:"binary"`
	// Module and Version name the router release; Package the main package.
	Module  string `json:"module"`
	Package string `json:"package"`
	Version string `json:"version"`
	// How says which of the script's two ways built it.
	How          string `json:"how"`
	RouterCommit string `json:"routerCommit"`
	// KVCacheModule, KVCacheVersion and KVCacheCommit name the llm-d-kv-cache
	// built with (a replaced module names the copy and its commit).
	KVCacheModule  string `json:"kvCacheModule"`
	KVCacheVersion string `json:"kvCacheVersion"`
	KVCacheCommit  string `json:"kvCacheCommit"`
	GoVersion      string `json:"goVersion"`
	BuildFlags     string `json:"buildFlags"`
	BuildSeconds   int    `json:"buildSeconds"`
	BinarySHA256   string `json:"binarySHA256"`
}

// LoadEPP reads the build in dir ("": DefaultEPPDir in the module root). Its errors are one line
// saying what to run.
func LoadEPP(dir string) (*EPPInstall, error) {
	dir, err := buildDir(dir, DefaultEPPDir)
	if err != nil {
		return nil, err
	}
	manifest := filepath.Join(dir, manifestFile)
	b, err := os.ReadFile(manifest)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w (no %s): run `%s` (go install from the module proxy, or LLMD_ROUTER_SRC and LLMD_KV_CACHE_SRC "+
			"naming checkouts of llm-d-router v0.10.0 and llm-d-kv-cache where the proxy does not serve github.com/llm-d; docs/upstream-llmd.md), "+
			"or name the directory of another build", ErrEPPNotInstalled, manifest, EPPInstallCommand)
	}
	if err != nil {
		return nil, fmt.Errorf("upstream-llmd: %w", err)
	}
	in := &EPPInstall{Dir: dir}
	if err := json.Unmarshal(b, in); err != nil {
		return nil, fmt.Errorf("upstream-llmd: %s: %v; run `%s`", manifest, err, EPPInstallCommand)
	}
	if in.Binary == "" || in.Version == "" || in.RouterCommit == "" {
		return nil, fmt.Errorf("upstream-llmd: %s names no binary, version or commit; run `%s`", manifest, EPPInstallCommand)
	}
	if _, err := os.Stat(in.Binary); err != nil {
		return nil, fmt.Errorf("upstream-llmd: %s names %s, which is missing (%v); run `%s`", manifest, in.Binary, err, EPPInstallCommand)
	}
	return in, nil
}

// Describe names the build in one line, for the environment's notes.
func (in *EPPInstall) Describe() string {
	return fmt.Sprintf("llm-d-router's EPP built from source: %s %s @%s (llm-d-kv-cache @%s, %s, binary sha256 %s)",
		in.Module, in.Version, in.RouterCommit, in.KVCacheCommit, in.GoVersion, in.BinarySHA256)
}
