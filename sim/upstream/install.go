// Package upstream runs the routers the operator's image runs, built from
// their pinned sources, as the sim's router containers: the clap binaries
// vllm-router (vllm-project/router v0.1.15) and sgl-model-gateway
// (sgl-project/sglang gateway-v0.3.1), compiled by `make routers`
// (hack/routers.sh) from the PyPI sdists that hold the same Rust sources.
// A container's rendered argv reaches the binary as the operator rendered
// it, except where one table (Translations) rewrites it for the sim (the
// Pod's address, the worker source), each row named and cited.
//
// make routers writes .routers/manifest.json, which Load reads: which
// binaries, built from which sdist (sha256), lock, toolchain and patches.
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

// DefaultDir is the manifest directory, relative to the module root. A
// caller names another (Load's dir): the suite passes its config's
// sim.routersDir, which the router-upgrade preview points at another
// version's build.
const DefaultDir = ".routers"

// manifestFile is what make routers and make upstream-llmd write into their
// directories, beside the binaries: what was built, from what.
const manifestFile = "manifest.json"

// InstallCommand is what a user runs to build or repair the routers.
const InstallCommand = "make routers"

// pins is sdists.txt: the sdists make routers builds; a manifest written
// from other pins is stale.
//
//go:embed sdists.txt
var pins []byte

// The committed locks, by binary: a pinned build used them.
var (
	//go:embed locks/vllm-router.Cargo.lock
	vllmLock []byte
	//go:embed locks/sgl-model-gateway.Cargo.lock
	gatewayLock []byte
)

var locks = map[string][]byte{"vllm-router": vllmLock, "sgl-model-gateway": gatewayLock}

// ErrNotInstalled is returned (wrapped) by Load when no build is there.
var ErrNotInstalled = errors.New("the routers are not built")

// Build is what make routers recorded of one binary's build.
type Build struct {
	// Router is the operator's router name; Binary the clap [[bin]] built.
	Router string `json:"router"`
	Binary string `json:"binary"`
	// Package and Version name the PyPI sdist; Sdist is its file name and
	// SdistSHA256 its digest.
	Package     string `json:"package"`
	Version     string `json:"version"`
	Sdist       string `json:"sdist"`
	SdistSHA256 string `json:"sdistSHA256"`
	// HashPinned: the sdist and lock are the pins of sdists.txt and locks/.
	HashPinned bool `json:"hashPinned"`
	// LockSHA256 is the digest of the Cargo.lock built with ("none": the
	// sdist's own or one generated at build time, for another version).
	LockSHA256 string `json:"lockSHA256"`
	// Patches are the patch files applied (ROUTER_PATCHES), in order.
	Patches       []string `json:"patches"`
	PatchesSHA256 string   `json:"patchesSHA256"`
	Toolchain     string   `json:"toolchain"`
	Profile       string   `json:"profile"`
	BuildSeconds  int      `json:"buildSeconds"`
	BinarySHA256  string   `json:"binarySHA256"`
}

// Binary is one built router binary.
type Binary struct {
	Path  string `json:"path"`
	Build Build  `json:"build"`
}

// Install is one `make routers` result, as its manifest says.
type Install struct {
	// Dir is the manifest directory.
	Dir        string   `json:"-"`
	PinsSHA256 string   `json:"pinsSHA256"`
	Binaries   []Binary `json:"binaries"`
	// TiktokenEncodingsBase holds o200k_base.tiktoken, which the SGLang
	// gateway's IGW mode loads at startup (see the harmony-vocab row).
	TiktokenEncodingsBase string `json:"tiktokenEncodingsBase"`
}

// Routers are the routers an install runs, in api order.
func Routers() []string { return []string{api.RouterVLLM, api.RouterSGLang} }

// Supports reports whether router is one make routers builds (llm-d-router
// is a Go program of its own: docs/routers-from-source.md).
func Supports(router string) bool { return slices.Contains(Routers(), router) }

// buildDir is dir made absolute, or def in the module root when dir is "".
func buildDir(dir, def string) (string, error) {
	if dir == "" {
		return moduleDir(def)
	}
	return filepath.Abs(dir)
}

// moduleDir is def in the module root found from the working directory.
func moduleDir(def string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil &&
			bytes.Contains(b, []byte("module github.com/gpustack/routing-conformance\n")) {
			return filepath.Join(d, def), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of github.com/gpustack/routing-conformance above %s to find %s in; name the directory the build wrote", wd, def)
		}
	}
}

// Load reads the build in dir ("": DefaultDir in the module root found
// from the working directory). Its errors say what to run.
// A relative dir is taken from the working directory.
func Load(dir string) (*Install, error) {
	dir, err := buildDir(dir, DefaultDir)
	if err != nil {
		return nil, err
	}
	manifest := filepath.Join(dir, manifestFile)
	b, err := os.ReadFile(manifest)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w (no %s): run `%s` (builds vllm-router and sgl-model-gateway from their pinned sources with cargo; about 20 minutes cold on 2 cores, cached after)",
			ErrNotInstalled, manifest, InstallCommand)
	}
	if err != nil {
		return nil, fmt.Errorf("routers: %w", err)
	}
	in := &Install{Dir: dir}
	if err := json.Unmarshal(b, in); err != nil {
		return nil, fmt.Errorf("routers: %s: %v; run `%s`", manifest, err, InstallCommand)
	}
	if in.PinsSHA256 != digest(pins) {
		return nil, fmt.Errorf("routers: %s was written from another sim/upstream/sdists.txt; run `%s`", manifest, InstallCommand)
	}
	for _, r := range Routers() {
		bin, ok := in.Binary(r)
		if !ok {
			return nil, fmt.Errorf("routers: %s lists no %s binary; run `%s`", manifest, r, InstallCommand)
		}
		if _, err := os.Stat(bin.Path); err != nil {
			return nil, fmt.Errorf("routers: %s names %s, which is missing (%v; a cleared cache?); run `%s`", manifest, bin.Path, err, InstallCommand)
		}
		if lock := locks[bin.Build.Binary]; bin.Build.HashPinned && bin.Build.LockSHA256 != digest(lock) {
			return nil, fmt.Errorf("routers: %s was built with another locks/%s.Cargo.lock than this tree's; run `%s`", bin.Path, bin.Build.Binary, InstallCommand)
		}
	}
	if _, err := os.Stat(filepath.Join(in.TiktokenEncodingsBase, "o200k_base.tiktoken")); err != nil {
		return nil, fmt.Errorf("routers: %s names no o200k_base vocab (%v); run `%s`", manifest, err, InstallCommand)
	}
	return in, nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Binary is the built binary that runs router.
func (in *Install) Binary(router string) (Binary, bool) {
	i := slices.IndexFunc(in.Binaries, func(b Binary) bool { return b.Build.Router == router })
	if i < 0 {
		return Binary{}, false
	}
	return in.Binaries[i], true
}

// PinsSHA256 is the digest of this tree's sdists.txt, as a manifest records it.
func PinsSHA256() string { return digest(pins) }

// LockSHA256 is the digest of this tree's committed lock for binary.
func LockSHA256(binary string) string { return digest(locks[binary]) }
