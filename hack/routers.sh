#!/usr/bin/env bash
# Builds the routers the operator's image runs, from their pinned sources:
#   vllm-router        the clap binary of vllm-project/router v0.1.15
#   sgl-model-gateway  the clap binary of sgl-project/sglang gateway-v0.3.1
# from the PyPI sdists that hold the same Rust sources (sha256-pinned in
# sim/upstream/sdists.txt), each with the Cargo.lock committed in
# sim/upstream/locks/, with cargo, into a cache outside the checkout
# keyed by sdist sha256 + lock + toolchain + profile + patches: a warm run
# builds nothing. It then writes .routers/manifest.json (ignored by git),
# which the sim reads to run them as the router containers.
#
#   hack/routers.sh                       build (or find in the cache) the pinned routers
#   ROUTER_PATCHES=DIR hack/routers.sh    apply DIR/vllm-router/*.patch (-p1) and
#                                         DIR/sglang-gateway/*.patch (-p2) first: a copy of the
#                                         operator's pack/llm-router/patches, to build its image's routers
#   SGLANG_ROUTER_VERSION=0.3.2 E2E_ROUTERS_DIR=/tmp/next hack/routers.sh
#                                         another served version (not hash-pinned; its own or a
#                                         generated lock): the router-upgrade preview
#
# Environment: ROUTERS_CACHE (default ~/.cache/routing-conformance/routers),
# E2E_ROUTERS_DIR (default .routers), CARGO_BUILD_JOBS as cargo reads it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/sim/upstream
pins=$src/sdists.txt
cache=${ROUTERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/routing-conformance/routers}
out=${E2E_ROUTERS_DIR:-$root/.routers}
patches=${ROUTER_PATCHES:-}
index=${PYPI_SIMPLE_URL:-https://pypi.org/simple}

say() { echo "routers: $*"; }
# fail says what failed and how to fix it, on one line.
fail() {
  echo "routers: $1; fix: $2" >&2
  exit 1
}

# The profile: release's semantics (no debug assertions, no overflow
# checks, panic=unwind) with lighter optimisation, so a cold build on two
# cores takes minutes, not half an hour. docs/routers-from-source.md says
# why no behaviour the suite observes depends on it.
export CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
  CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=true CARGO_PROFILE_RELEASE_INCREMENTAL=false
profile="release (opt-level=1, lto=false, codegen-units=16, debug=false, strip=true; debug-assertions and overflow-checks off as in release)"

# Prerequisites, each with the command that installs it.
command -v cargo >/dev/null 2>&1 || fail "cargo is not on PATH (the routers are Rust)" \
  "curl https://sh.rustup.rs -sSf | sh -s -- -y --profile minimal (or Debian: apt-get install cargo), then open a new shell"
command -v cc >/dev/null 2>&1 || fail "no C compiler (cc) on PATH (libzmq, ring, ODPI-C and zstd build C code)" "apt-get install build-essential"
command -v c++ >/dev/null 2>&1 || fail "no C++ compiler (c++) on PATH (libzmq is C++)" "apt-get install g++"
command -v protoc >/dev/null 2>&1 || fail "protoc is not on PATH (sgl-model-gateway compiles its gRPC protos)" "apt-get install protobuf-compiler"
[ -f /usr/include/google/protobuf/timestamp.proto ] || [ -n "${PROTOC_INCLUDE:-}" ] ||
  fail "protobuf's well-known .proto files are missing (sgl-model-gateway's protos import google/protobuf/timestamp.proto)" \
  "apt-get install libprotobuf-dev (or set PROTOC_INCLUDE to a directory holding google/protobuf/*.proto)"
command -v pkg-config >/dev/null 2>&1 || fail "pkg-config is not on PATH (openssl-sys finds OpenSSL with it)" "apt-get install pkg-config"
pkg-config --exists openssl 2>/dev/null || fail "OpenSSL's headers are missing (sgl-model-gateway links openssl)" "apt-get install libssl-dev"
command -v curl >/dev/null 2>&1 || fail "curl is not on PATH (downloads the sdists from PyPI)" "apt-get install curl"
if [ -n "$patches" ]; then
  command -v patch >/dev/null 2>&1 || fail "patch is not on PATH (ROUTER_PATCHES is set)" "apt-get install patch"
  [ -d "$patches" ] || fail "ROUTER_PATCHES=$patches is not a directory" \
    "point it at a copy of the operator's pack/llm-router/patches (with vllm-router/ and sglang-gateway/ in it)"
fi

toolchain=$(rustc -vV 2>/dev/null) || fail "rustc does not run" "install a Rust toolchain (rustup), 1.85 or newer"
toolchain_sum=$(printf '%s' "$toolchain" | sha256sum | cut -d' ' -f1)
rustc_version=$(rustc --version)
mkdir -p "$cache/sdists" "$cache/src" "$cache/target" "$cache/bin" "$out"

# sdist_url prints the download address and sha256 of PACKAGE's sdist FILE,
# from PyPI's JSON simple API.
sdist_url() {
  local pkg=$1 file=$2
  curl -fsSL --retry 3 -m 60 -H 'Accept: application/vnd.pypi.simple.v1+json' "$index/$pkg/" |
    python3 -c 'import json,sys; f=[x for x in json.load(sys.stdin)["files"] if x["filename"]==sys.argv[1]]; print(f[0]["url"], f[0]["hashes"]["sha256"]) if f else sys.exit(1)' "$file"
}

# fetch_sdist PACKAGE VERSION FILE WANT_SHA (empty: not pinned) → $cache/sdists/FILE
fetch_sdist() {
  local pkg=$1 version=$2 file=$3 want=$4 dest=$cache/sdists/$3
  if [ -f "$dest" ] && { [ -z "$want" ] || [ "$(sha256sum "$dest" | cut -d' ' -f1)" = "$want" ]; }; then
    return 0
  fi
  local meta url served
  if ! meta=$(sdist_url "$pkg" "$file"); then
    fail "PyPI ($index) serves no $file for $pkg==$version, or is out of reach" \
      "check access to PyPI (or set PYPI_SIMPLE_URL to a mirror's simple index), and that $pkg $version has an sdist (pip index versions $pkg)"
  fi
  read -r url served <<<"$meta"
  if [ -n "$want" ] && [ "$served" != "$want" ]; then
    fail "$file on PyPI has sha256 $served, not the pinned $want" "check what serves $index here; never edit the pin to match"
  fi
  say "downloading $file"
  curl -fsSL --retry 3 -m 300 -o "$dest.part" "$url" || fail "could not download $url" "check access to PyPI, then run make routers"
  local got
  got=$(sha256sum "$dest.part" | cut -d' ' -f1)
  if [ "$got" != "$served" ]; then
    rm -f "$dest.part"
    fail "$file downloaded with sha256 $got, not $served as PyPI lists it" "run make routers again"
  fi
  mv "$dest.part" "$dest"
}

# patch_set ROUTER prints the patch files for ROUTER under ROUTER_PATCHES.
patch_set() {
  [ -n "$patches" ] || return 0
  find "$patches/$1" -maxdepth 1 -name '*.patch' 2>/dev/null | LC_ALL=C sort
}

manifest_entries=()
started_all=$(date +%s)
while read -r router binary pkg version file sha; do
  case "$router" in ''|'#'*) continue ;; esac
  pinned=true
  override=""
  case "$router" in
    vllm-router) override=${VLLM_ROUTER_VERSION:-} ;;
    sglang-gateway) override=${SGLANG_ROUTER_VERSION:-} ;;
  esac
  if [ -n "$override" ] && [ "$override" != "$version" ]; then
    pinned=false
    file=${file/$version/$override}
    version=$override
    sha=""
    say "WARNING: $pkg $version is not the pin of sim/upstream/sdists.txt: its sdist is not hash-pinned and its lock is its own or generated now; the manifest and the report say so"
  fi
  fetch_sdist "$pkg" "$version" "$file" "$sha"
  sdist_sha=$(sha256sum "$cache/sdists/$file" | cut -d' ' -f1)
  lock=$src/locks/$binary.Cargo.lock
  lock_sum=none
  $pinned && lock_sum=$(sha256sum "$lock" | cut -d' ' -f1)
  mapfile -t plist < <(patch_set "$router")
  patch_sum=none
  if [ "${#plist[@]}" -gt 0 ]; then
    patch_sum=$(cat "${plist[@]}" | sha256sum | cut -d' ' -f1)
  elif [ -n "$patches" ]; then
    fail "ROUTER_PATCHES=$patches has no $router/*.patch" "point it at the operator's pack/llm-router/patches (it has vllm-router/ and sglang-gateway/)"
  fi
  key=$(printf '%s\n' "$sdist_sha" "$lock_sum" "$toolchain_sum" "$profile" "$patch_sum" "$binary" | sha256sum | cut -c1-16)
  bindir=$cache/bin/$router-$version-$key
  if [ -x "$bindir/$binary" ] && [ -f "$bindir/build.json" ]; then
    say "$binary $version: cached ($bindir), nothing to build"
  else
    tree=$cache/src/$binary-${sdist_sha:0:12}
    [ "$patch_sum" != none ] && tree=$tree-p${patch_sum:0:12}
    $pinned || tree=$tree-unpinned
    prepared="$sdist_sha $lock_sum $patch_sum"
    # A tree prepared from the same inputs is kept: unpacking anew would
    # touch every file and make cargo rebuild the router's own crate.
    if [ "$(cat "$tree/.routers-prepared" 2>/dev/null)" != "$prepared" ]; then
      rm -rf "$tree" && mkdir -p "$tree"
      tar -xzf "$cache/sdists/$file" -C "$tree" --strip-components=1
      if $pinned; then
        cp "$lock" "$tree/Cargo.lock"
      fi
      if [ "$binary" = sgl-model-gateway ]; then
        # openai-harmony v0.0.4 is a git dependency (a host this machine cannot
        # reach); 0.0.5 is the registry's oldest release. The committed lock
        # differs from the sdist's bindings/python/Cargo.lock in that package
        # only, besides dev-dependencies (docs/routers-from-source.md).
        sed -i 's|^openai-harmony = { git = "https://github.com/openai/harmony", tag = "v0.0.4" }$|openai-harmony = "=0.0.5"|' "$tree/Cargo.toml"
        if grep -q '^openai-harmony = { git' "$tree/Cargo.toml"; then
          fail "$file's Cargo.toml pins openai-harmony to another git tag than v0.0.4" "add its registry release to hack/routers.sh, or build the pinned version"
        fi
        if ! $pinned && [ -f "$tree/bindings/python/Cargo.lock" ]; then
          cp "$tree/bindings/python/Cargo.lock" "$tree/Cargo.lock"
        fi
      fi
      for p in "${plist[@]}"; do
        level=1
        [ "$router" = sglang-gateway ] && level=2
        say "applying $(basename "$p") (-p$level)"
        (cd "$tree" && patch -s -p"$level" <"$p") || fail "$p does not apply to $file" \
          "use the patches of the operator commit that pins $pkg $version"
      done
      echo "$prepared" >"$tree/.routers-prepared"
    fi
    # A dependency served only by a git host cannot be fetched here (the
    # registries are reachable, git hosts are not): say so before cargo tries.
    gitdeps=$(sed -n 's/^\([A-Za-z0-9_-]*\) = {.*git = "\([^"]*\)".*/\1 (\2)/p' "$tree/Cargo.toml" | paste -sd, | sed 's/,/, /g')
    if [ -n "$gitdeps" ]; then
      fail "$pkg $version's Cargo.toml takes $gitdeps from git, which only a git host serves" \
        "build it where a git host is reachable, or choose a version whose dependencies are all on crates.io"
    fi
    locked=(--locked)
    if ! $pinned; then
      locked=()
      [ -f "$tree/Cargo.lock" ] || (cd "$tree" && cargo generate-lockfile -q)
    fi
    log=$cache/build-$binary.log
    say "building $binary $version from source with cargo (cold: about 10 minutes on 2 cores; log: $log)"
    started=$(date +%s)
    total=$(grep -c '^name = ' "$tree/Cargo.lock" || true)
    (cd "$tree" && CARGO_TARGET_DIR=$cache/target/$binary cargo build "${locked[@]}" --release --bin "$binary" >"$log" 2>&1) &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
      sleep 30
      kill -0 "$pid" 2>/dev/null || break
      say "building $binary: $(grep -c 'Compiling' "$log" || true) crates compiled so far (the lock lists $total; what is cached is not rebuilt), $(($(date +%s) - started)) s"
    done
    if ! wait "$pid"; then
      tail -n 20 "$log" >&2
      fail "cargo build of $binary failed (the lines above; whole log: $log)" \
        "install what the error names (cargo, protoc, libssl-dev, a C/C++ compiler), then run make routers"
    fi
    took=$(($(date +%s) - started))
    rm -rf "$bindir.part" && mkdir -p "$bindir.part"
    cp "$cache/target/$binary/release/$binary" "$bindir.part/$binary"
    bin_sha=$(sha256sum "$bindir.part/$binary" | cut -d' ' -f1)
    cat >"$bindir.part/build.json" <<EOF
{"router": "$router", "binary": "$binary", "package": "$pkg", "version": "$version", "sdist": "$file",
 "sdistSHA256": "$sdist_sha", "hashPinned": $pinned, "lockSHA256": "$lock_sum", "patchesSHA256": "$patch_sum",
 "patches": [$(for p in "${plist[@]}"; do printf '"%s",' "$(basename "$p")"; done | sed 's/,$//')],
 "toolchain": "$rustc_version", "profile": "$profile", "buildSeconds": $took, "binarySHA256": "$bin_sha"}
EOF
    rm -rf "$bindir" && mv "$bindir.part" "$bindir"
    say "built $binary $version in $((took / 60)) min $((took % 60)) s"
  fi
  manifest_entries+=("{\"path\": \"$bindir/$binary\", \"build\": $(tr -d '\n' <"$bindir/build.json")}")
done <"$pins"

# sgl-model-gateway in IGW mode (the operator's case: service discovery turns
# it on) builds its gRPC routers at startup, which load the o200k_base vocab
# through openai-harmony, from openaipublic.blob.core.windows.net unless
# TIKTOKEN_ENCODINGS_BASE names a directory holding it. That host is out of
# reach here; the same file, byte for byte (harmony checks its sha256), is in
# the tiktoken-rs crate on crates.io, pinned below by the crate's checksum.
vocab_crate=tiktoken-rs-0.12.1
vocab_crate_sha=2aeff724640cfe13037336ddf35befdffd2909cbdb65cf041cc8a4cf8c584cfa
vocab_sha=446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d
vocab=$cache/tiktoken
mkdir -p "$vocab"
if [ "$(sha256sum "$vocab/o200k_base.tiktoken" 2>/dev/null | cut -d' ' -f1)" != "$vocab_sha" ]; then
  tmp=$(mktemp -d)
  if ! curl -fsSL --retry 3 -m 120 -o "$tmp/crate.tar.gz" "https://static.crates.io/crates/tiktoken-rs/$vocab_crate.crate"; then
    rm -rf "$tmp"
    fail "could not download $vocab_crate.crate from crates.io (the o200k_base vocab sgl-model-gateway's IGW mode loads)" \
      "check access to static.crates.io, then run make routers"
  fi
  if [ "$(sha256sum "$tmp/crate.tar.gz" | cut -d' ' -f1)" != "$vocab_crate_sha" ]; then
    rm -rf "$tmp"
    fail "$vocab_crate.crate does not have the pinned sha256 $vocab_crate_sha" "check what serves static.crates.io here"
  fi
  tar -xzf "$tmp/crate.tar.gz" -C "$tmp" "$vocab_crate/assets/o200k_base.tiktoken"
  if [ "$(sha256sum "$tmp/$vocab_crate/assets/o200k_base.tiktoken" | cut -d' ' -f1)" != "$vocab_sha" ]; then
    rm -rf "$tmp"
    fail "o200k_base.tiktoken in $vocab_crate differs from the file openai-harmony expects (sha256 $vocab_sha)" "report it; pin another crate version"
  fi
  mv "$tmp/$vocab_crate/assets/o200k_base.tiktoken" "$vocab/o200k_base.tiktoken"
  rm -rf "$tmp"
fi

{
  printf '{\n "pinsSHA256": "%s",\n "tiktokenEncodingsBase": "%s",\n "binaries": [\n  ' "$(sha256sum "$pins" | cut -d' ' -f1)" "$vocab"
  (IFS=$'\n'; echo "${manifest_entries[*]}") | sed '2,$s/^/  ,/'
  printf ' ]\n}\n'
} >"$out/manifest.json.part"
mv "$out/manifest.json.part" "$out/manifest.json"
say "ready in ${out#"$root"/} ($(($(date +%s) - started_all)) s): $(for e in "${manifest_entries[@]}"; do sed -n 's/.*"binary": "\([^"]*\)".*"version": "\([^"]*\)".*/\1 \2/p' <<<"$e"; done | paste -sd, | sed 's/,/, /g')"
