#!/usr/bin/env bash
# Builds llm-d-router v0.10.0's endpoint picker (cmd/epp), the binary the
# operator's llm-d router Pod runs as its epp container, into an ignored
# folder, and records what it built in manifest.json there. Two ways:
#
#   hack/upstream-llmd.sh
#       go install github.com/llm-d/llm-d-router/cmd/epp@v0.10.0, where the
#       Go module proxy serves that module (the public proxy does).
#   LLMD_ROUTER_SRC=DIR LLMD_KV_CACHE_SRC=DIR hack/upstream-llmd.sh
#       where it does not: build from local checkouts. DIR of the router is a
#       git work tree at v0.10.0 (the commit is checked); the kv-cache folder
#       replaces github.com/llm-d/llm-d-kv-cache through a go.mod copy outside
#       both trees (go build -modfile), so neither source folder is edited.
#
# Environment: E2E_LLMD_DIR (default .upstream-llmd), GO (default go),
# LLMD_ROUTER_SRC, LLMD_KV_CACHE_SRC. docs/upstream-llmd.md says more.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${E2E_LLMD_DIR:-$root/.upstream-llmd}
go=${GO:-go}
module=github.com/llm-d/llm-d-router
kvmodule=github.com/llm-d/llm-d-kv-cache
version=v0.10.0
# The commit tag v0.10.0 names in llm-d/llm-d-router.
want_commit=71f4f0999f95b96c49a9d0c4afbd18dfdb943c26
router_src=${LLMD_ROUTER_SRC:-}
kv_src=${LLMD_KV_CACHE_SRC:-}

# The image's flags (Dockerfile.epp): static, stripped, the version stamped
# where the EPP's "GIE build" startup line reads it.
export CGO_ENABLED=0
ldflags="-s -w -X $module/version.CommitSHA=$want_commit -X $module/version.BuildRef=$version"

say() { echo "upstream-llmd: $*"; }
# fail says what failed and how to fix it, on one line.
fail() {
  echo "upstream-llmd: $1; fix: $2" >&2
  exit "${fail_code:-1}"
}

command -v "$go" >/dev/null 2>&1 || fail "$go is not on PATH (the EPP is Go)" "install Go 1.26.6 or newer (llm-d-router $version's go.mod asks for it)"
go_version=$("$go" env GOVERSION)
mkdir -p "$out"

# finish writes the manifest for the binary at $out/epp.
finish() {
  local how=$1 router_commit=$2 kv_commit=$3 kv_version=$4 took=$5
  local sha
  sha=$(sha256sum "$out/epp" | cut -d' ' -f1)
  cat >"$out/manifest.json.part" <<EOF
{
 "binary": "$out/epp",
 "module": "$module",
 "package": "$module/cmd/epp",
 "version": "$version",
 "how": "$how",
 "routerCommit": "$router_commit",
 "kvCacheModule": "$kvmodule",
 "kvCacheVersion": "$kv_version",
 "kvCacheCommit": "$kv_commit",
 "goVersion": "$go_version",
 "buildFlags": "CGO_ENABLED=0 -trimpath -ldflags '$ldflags'",
 "buildSeconds": $took,
 "binarySHA256": "$sha"
}
EOF
  mv "$out/manifest.json.part" "$out/manifest.json"
  say "built $module/cmd/epp $version ($how) in $((took / 60)) min $((took % 60)) s: ${out#"$root"/}/epp, sha256 ${sha:0:16}…"
}

# The module proxy first: it builds the release exactly as tagged, with the
# kv-cache version its go.mod requires.
if "$go" list -m "$module@$version" >/dev/null 2>&1; then
  say "the module proxy serves $module@$version: go install (cold: minutes)"
  started=$(date +%s)
  tmpbin=$(mktemp -d)
  trap 'rm -rf "$tmpbin"' EXIT
  GOBIN=$tmpbin GOFLAGS=-buildvcs=false "$go" install -trimpath -ldflags="$ldflags" "$module/cmd/epp@$version" ||
    fail "go install $module/cmd/epp@$version failed (the lines above)" "fix what they name, then run make upstream-llmd"
  mv "$tmpbin/epp" "$out/epp"
  kv_version=$("$go" mod download -json "$module@$version" 2>/dev/null | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' | xargs -r grep -m1 "$kvmodule " | awk '{print $2}')
  finish "go install $module/cmd/epp@$version" "$want_commit" "" "${kv_version:-unknown}" $(($(date +%s) - started))
  exit 0
fi

if [ -z "$router_src" ] || [ -z "$kv_src" ]; then
  # Exit 3: neither way is available here (hack/test-upstream-llmd.sh tells
  # this apart from a build that failed).
  fail_code=3 fail "the Go module proxy ($("$go" env GOPROXY)) does not serve $module@$version and LLMD_ROUTER_SRC/LLMD_KV_CACHE_SRC are not both set" \
    "use a proxy that serves it (go install $module/cmd/epp@$version), or set LLMD_ROUTER_SRC to a git checkout of llm-d/llm-d-router at $version and LLMD_KV_CACHE_SRC to a copy of llm-d/llm-d-kv-cache's Go module"
fi
[ -f "$router_src/go.mod" ] && grep -q "^module $module\$" "$router_src/go.mod" ||
  fail "LLMD_ROUTER_SRC=$router_src holds no go.mod of $module" "point it at a checkout of llm-d/llm-d-router"
[ -f "$kv_src/go.mod" ] && grep -q "^module $kvmodule\$" "$kv_src/go.mod" ||
  fail "LLMD_KV_CACHE_SRC=$kv_src holds no go.mod of $kvmodule" "point it at a checkout of llm-d/llm-d-kv-cache"
router_commit=$(git -C "$router_src" rev-parse HEAD 2>/dev/null) ||
  fail "LLMD_ROUTER_SRC=$router_src is not a git work tree, so its commit cannot be checked" \
    "check it out with git (git worktree add DIR $version, or git clone), not as an archive"
[ "$router_commit" = "$want_commit" ] ||
  fail "LLMD_ROUTER_SRC is at commit $router_commit, not $version ($want_commit)" "git -C $router_src checkout $version"
[ -z "$(git -C "$router_src" status --porcelain --untracked-files=no 2>/dev/null)" ] ||
  fail "LLMD_ROUTER_SRC has local changes to tracked files" "build $version as tagged: git -C $router_src stash (or a clean work tree)"
kv_commit=$(git -C "$kv_src" rev-parse HEAD 2>/dev/null || echo unknown)

# The same inputs built once are not built again.
key="$router_commit $kv_commit $go_version $ldflags"
if [ -x "$out/epp" ] && [ "$(cat "$out/.key" 2>/dev/null)" = "$key" ] && [ -f "$out/manifest.json" ] &&
  grep -q "\"binarySHA256\": \"$(sha256sum "$out/epp" | cut -d' ' -f1)\"" "$out/manifest.json"; then
  say "epp $version from $router_commit with kv-cache $kv_commit: built already (${out#"$root"/}), nothing to do"
  exit 0
fi

# The replace lives in a go.mod copy outside both source trees; -mod=mod lets
# go add the go.sum lines the kv-cache copy's own requirements need there.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$router_src/go.mod" "$work/go.mod"
cp "$router_src/go.sum" "$work/go.sum"
kv_abs=$(cd "$kv_src" && pwd)
"$go" mod edit -modfile="$work/go.mod" -replace="$kvmodule=$kv_abs"
log=$out/build.log
say "building $module/cmd/epp $version from $router_src with $kvmodule => $kv_abs (cold: about 6 minutes on one core; log: ${log#"$root"/})"
started=$(date +%s)
if ! (cd "$router_src" && GOFLAGS="-buildvcs=false -mod=mod" "$go" build -modfile="$work/go.mod" -trimpath -ldflags="$ldflags" -o "$out/epp.part" ./cmd/epp) >"$log" 2>&1; then
  tail -n 20 "$log" >&2
  fail "go build of cmd/epp failed (the lines above; whole log: $log)" "check that LLMD_KV_CACHE_SRC compiles against $version"
fi
mv "$out/epp.part" "$out/epp"
echo "$key" >"$out/.key"
finish "go build -modfile (replace $kvmodule => LLMD_KV_CACHE_SRC)" "$router_commit" "$kv_commit" "replaced by $kv_abs" $(($(date +%s) - started))
