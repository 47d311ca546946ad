#!/usr/bin/env bash
# Installs the routers' upstream Rust code, as published on PyPI, into a
# project-local virtual environment (.upstream-routers/, ignored by git):
#   vllm-router   (vllm-project/router, PyO3 extension + argparse launcher)
#   sglang-router (sgl-model-gateway, maturin cdylib + argparse launcher)
#
#   hack/upstream-routers.sh            install the pins of clusters/sim/upstream/requirements.txt
#                                       (hash-checked; a no-op when already installed)
#   VLLM_ROUTER_VERSION=0.1.17 SGLANG_ROUTER_VERSION=0.3.2 hack/upstream-routers.sh
#                                       another served version of either router, resolved by pip
#                                       WITHOUT hash checking (a warning says so; the manifest records it)
#   hack/upstream-routers.sh lock       regenerate requirements.txt from requirements.in with pip-tools
#                                       (itself installed from the hash-pinned lock-requirements.txt)
#
# The sim's kubelet reads .upstream-routers/manifest.json (clusters/sim/upstream)
# to run a router container from this install; the report names the wheels
# and their sha256 from the same file.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${E2E_UPSTREAM_ROUTERS_DIR:-$root/.upstream-routers}
src=$root/clusters/sim/upstream
req=$src/requirements.txt
python=${PYTHON:-python3}
vr=${VLLM_ROUTER_VERSION:-}
sg=${SGLANG_ROUTER_VERSION:-}

say() { echo "upstream-routers: $*"; }
# fail says what failed and how to fix it, on one line.
fail() {
  echo "upstream-routers: $1; fix: $2" >&2
  exit 1
}

if ! command -v "$python" >/dev/null 2>&1; then
  fail "$python is not on PATH (CPython 3.8 or newer is needed for the routers' abi3 wheels)" \
    "install CPython 3 with its venv module (Debian: apt-get install python3-venv), or set PYTHON=/path/to/python3"
fi
if ! "$python" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 8) else 1)' 2>/dev/null; then
  fail "$("$python" --version 2>&1) cannot create a virtual environment for the routers (needs 3.8+ with venv)" \
    "install python3-venv, or set PYTHON to a CPython 3.8+ interpreter"
fi
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) fail "the pinned wheels are manylinux x86-64; this is $(uname -s)-$(uname -m)" \
       "run on Linux x86-64, or name served versions for this platform with VLLM_ROUTER_VERSION/SGLANG_ROUTER_VERSION" ;;
esac

# pipq runs pip quietly, keeping its output for the one-line failure: the
# index out of reach is said as such (pip then names only the first
# package it could not find), anything else by pip's last error.
pipq() {
  local log
  log=$(mktemp)
  if ! "$@" >"$log" 2>&1; then
    local last
    if grep -qE 'NewConnectionError|Failed to establish a new connection|Network is unreachable|Temporary failure in name resolution|ConnectTimeoutError|Max retries exceeded' "$log"; then
      last="the package index ${PIP_INDEX_URL:-https://pypi.org/simple} is out of reach: $(grep -oE "Failed to establish a new connection: [^')]*|Network is unreachable|Temporary failure in name resolution|ConnectTimeoutError" "$log" | head -n 1)"
    else
      last=$(grep -E 'ERROR|error|Could not|No matching|THESE PACKAGES' "$log" | tail -n 1)
    fi
    rm -f "$log"
    echo "${last:-pip failed}"
    return 1
  fi
  rm -f "$log"
}

if [ "${1:-}" = "lock" ]; then
  lockenv=$dir/lock-venv
  "$python" -m venv --clear "$lockenv"
  if ! why=$(pipq "$lockenv/bin/pip" install --require-hashes --no-deps -r "$src/lock-requirements.txt"); then
    fail "could not install pip-tools from lock-requirements.txt ($why)" "check access to PyPI (or PIP_INDEX_URL), then run make upstream-routers-lock"
  fi
  (cd "$src" && "$lockenv/bin/pip-compile" -q --generate-hashes --strip-extras --no-emit-find-links \
    --no-emit-index-url --allow-unsafe -o requirements.txt requirements.in)
  say "wrote $req from requirements.in; run make upstream-routers to install it"
  exit 0
fi

pinned=true
[ -n "$vr$sg" ] && pinned=false
reqsum=$(sha256sum "$req" | cut -d' ' -f1)
want="requirements=$reqsum vllm-router=${vr:-pinned} sglang-router=${sg:-pinned} python=$("$python" -c 'import sys; print(sys.version.split()[0])')"

if [ -f "$dir/stamp" ] && [ "$(cat "$dir/stamp")" = "$want" ] && [ -f "$dir/manifest.json" ] &&
  [ -f "$dir/tiktoken/o200k_base.tiktoken" ] &&
  "$dir/venv/bin/python" -c 'import vllm_router, sglang_router' 2>/dev/null; then
  say "already installed in ${dir#"$root"/} ($(paste -sd' ' "$dir/versions"))"
  exit 0
fi

say "installing into ${dir#"$root"/} (about a minute: two Rust wheels, 37 MB, and their Python dependencies)"
rm -rf "$dir/venv" "$dir/wheels" "$dir/stamp" "$dir/manifest.json" "$dir/versions"
mkdir -p "$dir/wheels"
"$python" -m venv "$dir/venv"
pip=("$dir/venv/bin/python" -m pip --disable-pip-version-check)

if $pinned; then
  # Download first, so the manifest can name the exact files pip checked.
  if ! why=$(pipq "${pip[@]}" download --require-hashes --no-deps --only-binary=:all: -r "$req" -d "$dir/wheels"); then
    fail "cannot download vllm-router==0.1.15 and sglang-router==0.3.1 with their dependencies (clusters/sim/upstream/requirements.txt): $why" \
      "check access to PyPI (or set PIP_INDEX_URL to a mirror that serves them), then run make upstream-routers"
  fi
  if ! why=$(pipq "${pip[@]}" install --no-index --find-links "$dir/wheels" --require-hashes --no-deps -r "$req"); then
    fail "the downloaded wheels did not install ($why)" "rm -rf .upstream-routers && make upstream-routers"
  fi
else
  # Another version: the other router keeps its pin; pip resolves the
  # dependencies anew, so nothing here is hash-checked.
  pins=()
  pins+=("vllm-router==${vr:-$(sed -n 's/^vllm-router==\([^ ]*\).*/\1/p' "$req")}")
  pins+=("sglang-router==${sg:-$(sed -n 's/^sglang-router==\([^ ]*\).*/\1/p' "$req")}")
  say "WARNING: ${pins[*]} installed WITHOUT hash checking (not the pins of clusters/sim/upstream/requirements.txt); the report and manifest say so"
  if ! why=$(pipq "${pip[@]}" download --only-binary=:all: "${pins[@]}" -d "$dir/wheels"); then
    fail "could not download ${pins[*]} ($why)" \
      "name a version PyPI serves for Linux x86-64 (pip index versions vllm-router / sglang-router), then rerun"
  fi
  if ! why=$(pipq "${pip[@]}" install --no-index --find-links "$dir/wheels" "${pins[@]}"); then
    fail "the downloaded wheels did not install ($why)" "rm -rf .upstream-routers and rerun"
  fi
fi

# sgl-model-gateway in IGW mode (the operator's case: service discovery turns
# it on) builds its gRPC routers at startup, which load the o200k_base vocab
# through openai-harmony, from openaipublic.blob.core.windows.net unless
# TIKTOKEN_ENCODINGS_BASE names a directory holding it. That host is out of
# reach here; the same file, byte for byte (harmony checks its sha256), is in
# the tiktoken-rs crate on crates.io, pinned below by the crate's checksum.
vocab_crate=tiktoken-rs-0.12.1
vocab_crate_sha=2aeff724640cfe13037336ddf35befdffd2909cbdb65cf041cc8a4cf8c584cfa
vocab_sha=446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d
mkdir -p "$dir/tiktoken"
if [ "$(sha256sum "$dir/tiktoken/o200k_base.tiktoken" 2>/dev/null | cut -d' ' -f1)" != "$vocab_sha" ]; then
  tmp=$(mktemp -d)
  if ! curl -fsSL --retry 3 -m 120 -o "$tmp/crate.tar.gz" "https://static.crates.io/crates/tiktoken-rs/$vocab_crate.crate"; then
    rm -rf "$tmp"
    fail "could not download $vocab_crate.crate from crates.io (the o200k_base vocab sgl-model-gateway's IGW mode loads)" \
      "check access to static.crates.io, then run make upstream-routers"
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
  mv "$tmp/$vocab_crate/assets/o200k_base.tiktoken" "$dir/tiktoken/o200k_base.tiktoken"
  rm -rf "$tmp"
fi

# The manifest: which code will run, by wheel file and sha256.
"$dir/venv/bin/python" - "$dir" "$pinned" "$reqsum" <<'EOF'
import hashlib, json, os, sys
from importlib import metadata
d, pinned, reqsum = sys.argv[1], sys.argv[2] == "true", sys.argv[3]
wheels = []
for pkg, module in (("vllm-router", "vllm_router"), ("sglang-router", "sglang_router")):
    version = metadata.version(pkg)
    prefix = pkg.replace("-", "_") + "-" + version + "-"
    files = [f for f in os.listdir(os.path.join(d, "wheels")) if f.startswith(prefix) and f.endswith(".whl")]
    if len(files) != 1:
        sys.exit("upstream-routers: expected one %s wheel in %s/wheels, found %r" % (pkg, d, files))
    with open(os.path.join(d, "wheels", files[0]), "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    wheels.append({"package": pkg, "module": module, "version": version, "file": files[0],
                   "sha256": digest, "hashChecked": pinned})
json.dump({"python": os.path.join(d, "venv", "bin", "python"),
           "tiktokenEncodingsBase": os.path.join(d, "tiktoken"),
           "pythonVersion": sys.version.split()[0],
           "requirementsSHA256": reqsum if pinned else "",
           "wheels": wheels}, open(os.path.join(d, "manifest.json"), "w"), indent=2)
with open(os.path.join(d, "versions"), "w") as fh:
    fh.write("\n".join("%s==%s" % (w["package"], w["version"]) for w in wheels))
EOF
echo "$want" >"$dir/stamp"
say "installed $(paste -sd' ' "$dir/versions") into ${dir#"$root"/}"
