#!/usr/bin/env bash
# Fetch current editors from Debian unstable for the editor tests, none of which Debian 12 carries:
# Neovim 0.12+ (vim.lsp.inline_completion), Helix, and lsp-mode 10 for Emacs (lsp-inline-completion-mode;
# pure Emacs Lisp, which Debian 12's Emacs loads from DEST/root/usr/share/emacs/site-lisp/elpa-src).
# apt downloads them (checking the archive's signature with Debian's keyring and every file's hash) into a
# private state folder, so nothing on the system changes; they are unpacked together with the C library
# they were built against, and patchelf points each editor at that library's loader (a wrapper that ran
# the loader by hand would break Neovim, which re-executes itself); DEST/bin holds the editors' wrappers.
# Usage: scripts/fetch-editors.sh [DEST]   (default: .editors; about 100 MB)
# Exits 0 with a warning when it cannot (no apt, no network): the tests that need the editors skip.
set -euo pipefail
cd "$(dirname "$0")/.."
dest="$(mkdir -p "${1:-.editors}" && cd "${1:-.editors}" && pwd)"
packages=(neovim hx elpa-lsp-mode patchelf)  # patchelf: to point the editors at the unpacked C library
warn() { echo "fetch-editors: $*; the tests that need Neovim 0.12, Helix or lsp-mode 10 will be skipped" >&2; exit 0; }
if "$dest/bin/nvim" --version >/dev/null 2>&1 && "$dest/bin/hx" --version >/dev/null 2>&1 \
   && compgen -G "$dest/root/usr/share/emacs/site-lisp/elpa-src/lsp-mode-*" >/dev/null; then
  echo "fetch-editors: already in $dest/bin"; exit 0
fi
command -v apt-get >/dev/null 2>&1 || warn "apt-get not found (Debian or Ubuntu only)"

state="$dest/apt"
mkdir -p "$state/lists/partial" "$state/archives/partial" "$state/sources" "$dest/debs"
touch "$state/status"
cat > "$state/sources/unstable.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: unstable
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
apt_opts=(-q -o "Dir::State=$state" -o "Dir::State::Lists=$state/lists" -o "Dir::State::status=$state/status"
          -o "Dir::Cache=$state" -o "Dir::Cache::Archives=$state/archives"
          -o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$state/sources"
          -o "APT::Sandbox::User=root")
apt-get "${apt_opts[@]}" update >/dev/null || warn "could not read Debian unstable's package lists"
# The editors and everything they depend on, down to the C library (about 25 packages, ~35 MB).
mapfile -t closure < <(apt-cache "${apt_opts[@]}" depends --recurse --no-recommends --no-suggests \
  --no-conflicts --no-breaks --no-replaces --no-enhances "${packages[@]}" | grep -v '^ ' | grep -v '^<' | sort -u)
(cd "$dest/debs" && rm -f ./*.deb && apt-get "${apt_opts[@]}" download "${closure[@]}" >/dev/null) \
  || warn "could not download ${closure[*]}"

rm -rf "$dest/root" && mkdir -p "$dest/root" "$dest/bin"
for deb in "$dest"/debs/*.deb; do dpkg-deb -x "$deb" "$dest/root"; done
libdir="$dest/root/usr/lib/$(uname -m)-linux-gnu"
loader="$(ls "$libdir"/ld-linux*.so.* 2>/dev/null | head -1)"
[ -n "$loader" ] || warn "no dynamic loader in the unpacked C library"

patch() {  # BINARY: use the unpacked C library's loader and libraries
  "$loader" --library-path "$libdir" "$dest/root/usr/bin/patchelf" \
    --set-interpreter "$loader" --force-rpath --set-rpath "$libdir" "$1"
}
write_wrapper() {  # NAME BINARY ENV_ASSIGNMENT
  patch "$2"
  printf '#!/bin/sh\n# %s from Debian unstable (scripts/fetch-editors.sh)\n%s exec "%s" "$@"\n' "$1" "$3" "$2" > "$dest/bin/$1"
  chmod +x "$dest/bin/$1"
}
write_wrapper nvim "$dest/root/usr/bin/nvim" "VIMRUNTIME=$dest/root/usr/share/nvim/runtime"
write_wrapper hx "$dest/root/usr/lib/hx/hx" "HELIX_RUNTIME=$dest/root/usr/lib/hx/runtime"
rm -rf "$state" "$dest/debs"  # keep only what runs
"$dest/bin/nvim" --version | head -1
"$dest/bin/hx" --version
ls -d "$dest"/root/usr/share/emacs/site-lisp/elpa-src/lsp-mode-*
