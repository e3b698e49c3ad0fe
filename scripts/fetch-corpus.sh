#!/usr/bin/env bash
# fetch-corpus.sh — gather non-Python source code for training a code-completion
# draft model, using only the package registries this machine can reach
# (the npm registry and Debian's apt archive) plus files already installed
# locally (/usr/include, a JDK src.zip).
#
# Usage: scripts/fetch-corpus.sh [--force] [--only LANG[,LANG...]] [--cap-mb N] DEST_DIR
#
# Creates DEST_DIR/{javascript,typescript,go,rust,java,c,cpp}, each holding real
# source files of that language (original relative paths kept under a folder
# per upstream package), capped at --cap-mb MB per language (default 40).
#
#   javascript  npm tarballs (npm pack, never installed; no scripts run):
#               three, webpack, eslint, svelte, lodash, express, axios, ...
#   typescript  npm tarballs that ship their .ts sources (effect, rxjs, zod,
#               @tanstack/*, mobx, immer, @reduxjs/toolkit, @trpc/*), then
#               declaration files (typescript@5 lib/*.d.ts, @types/node)
#   go          Debian golang-1.NN-src (highest available): GOROOT/src,
#               no testdata/, no "Code generated ... DO NOT EDIT" files
#   rust        Debian rust-src (std/core/alloc, compiler, tools) and
#               Debian librust-*-dev crate sources (serde, tokio, regex, ...)
#   java        a local JDK src.zip (else Debian openjdk-NN-source; env
#               JAVA_SRC_ZIP=PATH|apt overrides the choice): java.base
#               java.util/io/nio/net/lang/..., java.net.http, java.sql, javac, ...
#   c           Debian glibc-source, newlib-source, libxcrypt-source, and the C
#               headers under /usr/include
#   cpp         libstdc++ headers (/usr/include/c++/N), Debian googletest,
#               abseil, fmt, spdlog, nlohmann-json, catch2, CLI11, rapidjson,
#               oneTBB, Eigen, and a selection of Boost headers
#
# Filters applied to every file: wanted extension only; not '*.min.*'; UTF-8
# text without NUL bytes; average line length <= 300 chars and no line over
# 5000 chars (drops minified/bundled code and data tables); size between 32 B
# and 1 MiB; no "generated, do not edit" header; byte-identical duplicates
# dropped. C++ headers without an extension (libstdc++ <vector>, ...) and
# .tcc/.ipp implementation headers are stored with '.hpp' appended so that
# every file's language is clear from its name.
#
# Safety: npm pack never runs package scripts (--ignore-scripts is passed
# anyway); Debian packages are fetched with `apt-get download` and unpacked
# with `dpkg -x` (never installed, no maintainer scripts). Everything is
# staged in a temporary directory that is removed on exit.
#
# Idempotent: a language whose folder was completed by an earlier run (marker
# DEST_DIR/.fetch-corpus/LANG.done) is skipped unless --force is given; a
# folder left half-filled by an interrupted run is rebuilt from scratch.
#
# Exit status: 0 when every requested language was filled, 1 when any failed
# (the summary table says which), 2 on bad usage (e.g. DEST_DIR missing).
set -euo pipefail

ALL_LANGS=(javascript typescript go rust java c cpp)
PROG=$(basename "$0")

usage() {
  cat <<EOF
Usage: $PROG [--force] [--only LANG[,LANG...]] [--cap-mb N] DEST_DIR

Fill DEST_DIR/{$(IFS=,; echo "${ALL_LANGS[*]}")} with real source code fetched from
the npm registry, Debian's apt archive and local files (see the header of this
script for the sources and filters).

  --force        rebuild languages that an earlier run already completed
  --only LIST    comma-separated subset of: ${ALL_LANGS[*]}
  --cap-mb N     per-language size cap in MB (default 40)
  -h, --help     show this help
EOF
}

die_usage() { echo "$PROG: error: $*" >&2; echo >&2; usage >&2; exit 2; }
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
warn() { printf '[%s] WARNING: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

FORCE=0
CAP_MB=40
ONLY=""
DEST=""
while (($#)); do
  case "$1" in
    --force) FORCE=1 ;;
    --only) [[ $# -ge 2 ]] || die_usage "--only needs a value"; ONLY=$2; shift ;;
    --only=*) ONLY=${1#*=} ;;
    --cap-mb) [[ $# -ge 2 ]] || die_usage "--cap-mb needs a value"; CAP_MB=$2; shift ;;
    --cap-mb=*) CAP_MB=${1#*=} ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) die_usage "unknown option: $1" ;;
    *) [[ -z $DEST ]] || die_usage "more than one DEST_DIR given ('$DEST' and '$1')"; DEST=$1 ;;
  esac
  shift
done
if (($#)); then
  [[ -z $DEST && $# -eq 1 ]] || die_usage "unexpected arguments: $*"
  DEST=$1
fi
[[ -n $DEST ]] || die_usage "DEST_DIR is missing: give the folder to fill, e.g. '$PROG /data/corpus'"
[[ $CAP_MB =~ ^[0-9]+$ && $CAP_MB -gt 0 ]] || die_usage "--cap-mb must be a positive integer (got '$CAP_MB')"

LANGS=("${ALL_LANGS[@]}")
if [[ -n $ONLY ]]; then
  IFS=',' read -r -a LANGS <<<"$ONLY"
  for l in "${LANGS[@]}"; do
    [[ " ${ALL_LANGS[*]} " == *" $l "* ]] || die_usage "unknown language '$l' in --only (known: ${ALL_LANGS[*]})"
  done
fi

command -v python3 >/dev/null || { echo "$PROG: error: python3 is required" >&2; exit 1; }

if [[ -e $DEST && ! -d $DEST ]]; then
  echo "$PROG: error: DEST_DIR '$DEST' exists and is not a directory" >&2; exit 2
fi
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
STATE="$DEST/.fetch-corpus"
mkdir -p "$STATE"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/fetch-corpus.XXXXXX")
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

START_TS=$(date +%s)

# ---------------------------------------------------------------------------
# pick.py: copy filtered source files from roots (folders or a zip) into a
# language folder, in priority order, up to the language cap.
# ---------------------------------------------------------------------------
cat >"$WORK/pick.py" <<'PY'
import argparse, fnmatch, hashlib, os, re, sys, zipfile

ap = argparse.ArgumentParser()
ap.add_argument("lang_dir")
ap.add_argument("--cap-mb", type=float, required=True)
ap.add_argument("--ext", required=True, help="comma list of extensions kept as is")
ap.add_argument("--suffix-ext", default="", help="comma list of extensions ('none' = no extension) kept with --suffix appended")
ap.add_argument("--suffix", default="")
ap.add_argument("--exclude-dir", default="", help="comma list of directory names to skip")
ap.add_argument("--exclude-glob", default="", help="comma list of basename globs to skip")
ap.add_argument("--include-glob", default="", help="comma list of basename globs; if given, only these")
ap.add_argument("--dts", choices=["any", "no", "only"], default="any")
ap.add_argument("--js-siblings", action="store_true", help="skip x.cjs/x.mjs when x.js exists (and .d.cts/.d.mts vs .d.ts)")
ap.add_argument("--max-file-kb", type=int, default=1024)
ap.add_argument("--min-bytes", type=int, default=32)
ap.add_argument("--zip", default="")
ap.add_argument("roots", nargs="+", help="SRC|DEST_SUBDIR|ROOT_CAP_MB (cap 0 = none)")
a = ap.parse_args()

split = lambda s: [x for x in s.split(",") if x]
exts = set(split(a.ext))
sexts = set(split(a.suffix_ext))
exdirs = set(split(a.exclude_dir))
exglobs = split(a.exclude_glob)
inglobs = split(a.include_glob)
cap = int(a.cap_mb * 1024 * 1024)
maxf = a.max_file_kb * 1024
GEN = re.compile(r"Code generated .{0,200}DO NOT EDIT|@generated\b|automatically generated by|This file is generated|THIS FILE IS GENERATED|DO NOT EDIT THIS FILE", re.I)
DTS = (".d.ts", ".d.mts", ".d.cts")
DATA_CHARS = b"0123456789abcdefABCDEFxXuUlL,{}()[];'\"\\_-+.:"

# state already in the language folder (earlier passes of this run)
total, seen = 0, set()
for dp, dn, fn in os.walk(a.lang_dir):
    for f in fn:
        p = os.path.join(dp, f)
        with open(p, "rb") as fh:
            b = fh.read()
        total += len(b)
        seen.add(hashlib.sha1(b).digest())

def exdir(name):
    return name in exdirs or any(fnmatch.fnmatch(name, g) for g in exdirs)

def ext_of(name):
    base = name.rsplit("/", 1)[-1]
    if "." not in base.lstrip("."):
        return "none"
    return "." + base.rsplit(".", 1)[1]

def wanted(relpath, siblings):
    name = relpath.rsplit("/", 1)[-1]
    parts = relpath.split("/")[:-1]
    if any(exdir(p) for p in parts):
        return None
    if ".min." in name or name.endswith(".min.js"):
        return None
    if inglobs and not any(fnmatch.fnmatch(name, g) for g in inglobs):
        return None
    if any(fnmatch.fnmatch(name, g) for g in exglobs):
        return None
    is_dts = name.endswith(DTS)
    if a.dts == "no" and is_dts:
        return None
    if a.dts == "only" and not is_dts:
        return None
    e = ext_of(name)
    if e in exts:
        out = name
    elif e in sexts:
        out = name + a.suffix
    else:
        return None
    if a.js_siblings and siblings is not None:
        stem = None
        for dup, pref in ((".d.cts", ".d.ts"), (".d.mts", ".d.ts"), (".cjs", ".js"), (".mjs", ".js"), (".cts", ".ts"), (".mts", ".ts")):
            if name.endswith(dup):
                stem = name[: -len(dup)] + pref
                break
        if stem and stem in siblings:
            return None
    return out

def good_text(b):
    if len(b) < a.min_bytes or len(b) > maxf or b"\0" in b:
        return False
    try:
        t = b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    lines = t.split("\n")
    if len(t) / max(1, len(lines)) > 300:
        return False
    if max(len(l) for l in lines) > 5000:
        return False
    if GEN.search(t[:2048]):
        return False
    # numeric/hex lookup tables (charset maps, DES tables, ...) are data, not code
    if len(b) > 4096:
        nw = b.translate(None, b" \t\r\n")
        if nw and 1 - len(nw.translate(None, DATA_CHARS)) / len(nw) > 0.85:
            return False
    return True

zf = zipfile.ZipFile(a.zip) if a.zip else None
znames = sorted(n for n in zf.namelist() if not n.endswith("/")) if zf else []

def iter_root(src):
    """yield (relpath, reader) sorted, relative to src"""
    if zf:
        pre = src.rstrip("/") + "/"
        names = [n for n in znames if n.startswith(pre)]
        sib = {}
        for n in names:
            d, _, f = n.rpartition("/")
            sib.setdefault(d, set()).add(f)
        for n in names:
            d, _, f = n.rpartition("/")
            yield n[len(pre):], sib[d], (lambda n=n: zf.read(n))
        return
    if os.path.isfile(src):
        d, f = os.path.split(src)
        yield f, {f}, (lambda: open(src, "rb").read())
        return
    for dp, dn, fn in os.walk(src):
        dn[:] = sorted(x for x in dn if not exdir(x) and not os.path.islink(os.path.join(dp, x)))
        fs = set(fn)
        for f in sorted(fn):
            p = os.path.join(dp, f)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            rel = os.path.relpath(p, src).replace(os.sep, "/")
            yield rel, fs, (lambda p=p: open(p, "rb").read())

full = False
for spec in a.roots:
    src, dsub, rcap = (spec.split("|") + ["", "0"])[:3]
    rcap = int(float(rcap or 0) * 1024 * 1024)
    if not zf and not os.path.exists(src):
        print(f"    (missing, skipped) {src}", file=sys.stderr)
        continue
    n = nb = 0
    for rel, sib, read in iter_root(src):
        out = wanted(rel, sib)
        if out is None:
            continue
        b = read()
        if not good_text(b):
            continue
        h = hashlib.sha1(b).digest()
        if h in seen:
            continue
        if total + len(b) > cap:
            full = True
            break
        if rcap and nb + len(b) > rcap:
            break
        dst = os.path.join(a.lang_dir, dsub, os.path.dirname(rel), out)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "wb") as fh:
            fh.write(b)
        seen.add(h)
        total += len(b)
        n += 1
        nb += len(b)
    print(f"    {dsub or '.':<44} {n:6d} files {nb/1048576:7.2f} MB", file=sys.stderr)
    if full:
        print(f"    language cap of {a.cap_mb:g} MB reached", file=sys.stderr)
        break
PY

pick() { python3 "$WORK/pick.py" "$@"; }

# ---------------------------------------------------------------------------
# apt helpers: download .deb files (never install) and unpack with dpkg -x
# ---------------------------------------------------------------------------
APT_UPDATED=0
APT_OPTS=(-q)
[[ $(id -u) -eq 0 ]] && APT_OPTS+=(-o APT::Sandbox::User=root)

apt_update_once() {
  ((APT_UPDATED)) && return 0
  APT_UPDATED=1
  if [[ $(id -u) -ne 0 ]]; then
    warn "apt package lists look stale/missing and we are not root; run 'apt-get update' as root"
    return 1
  fi
  log "apt-get update"
  apt-get "${APT_OPTS[@]}" update >"$WORK/apt-update.log" 2>&1 || { warn "apt-get update failed (see below)"; tail -5 "$WORK/apt-update.log" >&2; return 1; }
}

# has_candidate PKG: true if apt can download PKG (a real, non-virtual package)
has_candidate() {
  local c
  c=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2; exit}')
  [[ -n $c && $c != "(none)" ]]
}

# apt_pkgs_with_prefix PREFIX REGEX: package names matching REGEX, version-sorted
apt_pkgs_matching() {
  apt-cache pkgnames "$1" 2>/dev/null | grep -E "$2" | sort -V || true
}

ensure_apt_lists() {
  command -v apt-get >/dev/null || { warn "apt-get not found"; return 1; }
  command -v dpkg >/dev/null || { warn "dpkg not found"; return 1; }
  if ! has_candidate dpkg; then apt_update_once || true; fi
}

# DEB_FILTER[pkg]="glob ...": unpack only these paths of pkg (tar --wildcards,
# '*' also matches '/'); packages without an entry are unpacked whole.
declare -A DEB_FILTER=(
  [rust-src]="*/library/*.rs */compiler/*.rs */src/tools/rustfmt/src/*.rs */src/tools/clippy/clippy_lints/*.rs"
)

# apt_fetch OUTDIR PKG...: download the packages that exist and unpack each
# into OUTDIR/PKG. Prints nothing; missing packages are warned about.
apt_fetch() {
  local out=$1; shift
  local dl="$WORK/debs" p ok=() deb
  mkdir -p "$dl" "$out"
  ensure_apt_lists || return 1
  # one apt-cache call for all names (it is slow per call); keep those with a candidate
  local have
  have=$(apt-cache policy "$@" 2>/dev/null | awk '/^[^ ]/ {p=$1; sub(/:$/, "", p)} /Candidate:/ && $2 != "(none)" {print p}')
  for p in "$@"; do
    if grep -qxF -- "$p" <<<"$have"; then ok+=("$p"); else warn "apt: no package '$p' here, skipped"; fi
  done
  ((${#ok[@]})) || return 0
  if ! (cd "$dl" && apt-get "${APT_OPTS[@]}" download "${ok[@]}" >"$WORK/apt-dl.log" 2>&1); then
    # stale lists give 404s: refresh once and retry
    if apt_update_once; then
      (cd "$dl" && apt-get "${APT_OPTS[@]}" download "${ok[@]}" >"$WORK/apt-dl.log" 2>&1) || {
        warn "apt-get download failed:"; grep -E '^(E|W):' "$WORK/apt-dl.log" | head -5 >&2; return 1; }
    else
      warn "apt-get download failed:"; grep -E '^(E|W):' "$WORK/apt-dl.log" | head -5 >&2; return 1
    fi
  fi
  for p in "${ok[@]}"; do
    deb=$(ls "$dl/${p}_"*.deb 2>/dev/null | head -1 || true)
    [[ -n $deb ]] || { warn "apt: $p did not download"; continue; }
    mkdir -p "$out/$p"
    if [[ -n ${DEB_FILTER[$p]:-} ]]; then
      # big packages: unpack only the wanted paths (same as dpkg -x, minus the
      # tens of thousands of files we would throw away)
      local pats
      read -r -a pats <<<"${DEB_FILTER[$p]}"
      dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$out/$p" --no-same-owner --wildcards "${pats[@]}" 2>/dev/null \
        || warn "apt: unpacking part of $p failed"
    else
      dpkg -x "$deb" "$out/$p"
    fi
    rm -f "$deb"
  done
}

# ---------------------------------------------------------------------------
# npm: pack (download) tarballs once, shared by javascript and typescript
# ---------------------------------------------------------------------------
NPM_DIR="$WORK/npm"
NPM_READY=0
NPM_PKGS=(
  # javascript
  three webpack eslint svelte lodash express koa ws axios commander yargs chalk
  mocha knex mongoose moment underscore async jquery react react-dom vue preact
  date-fns d3 @angular/core
  # typescript (ship src/*.ts) and declarations
  effect @effect/platform rxjs zod @tanstack/query-core @tanstack/react-query
  @tanstack/router-core @tanstack/store @tanstack/virtual-core immer mobx
  @reduxjs/toolkit @trpc/server @trpc/client
  typescript@5 @types/node kysely
)

npm_fetch() {
  ((NPM_READY)) && return 0
  command -v npm >/dev/null || { warn "npm not found"; return 1; }
  mkdir -p "$NPM_DIR/tgz"
  log "npm pack ${#NPM_PKGS[@]} packages"
  local t0
  t0=$(date +%s)
  local s
  if ! (cd "$NPM_DIR/tgz" && npm pack --ignore-scripts --json "${NPM_PKGS[@]}" >"$NPM_DIR/pack.json" 2>"$NPM_DIR/pack.err"); then
    warn "batch npm pack failed; packing one by one"
    rm -f "$NPM_DIR"/tgz/*.tgz
    for s in "${NPM_PKGS[@]}"; do
      (cd "$NPM_DIR/tgz" && npm pack --ignore-scripts --silent "$s" >/dev/null 2>>"$NPM_DIR/pack.err") \
        || warn "npm pack $s failed"
    done
  fi
  local t name
  for t in "$NPM_DIR"/tgz/*.tgz; do
    [[ -e $t ]] || continue
    mkdir -p "$NPM_DIR/x.tmp"
    # only code files and the manifest (no source maps, docs, assets)
    tar -xzf "$t" -C "$NPM_DIR/x.tmp" --no-same-owner --no-same-permissions --wildcards \
      '*.js' '*.mjs' '*.cjs' '*.ts' '*.tsx' '*.mts' '*.cts' '*/package.json' 2>/dev/null || true
    # tarballs normally hold package/, a few use another top folder
    local top
    top=$(find "$NPM_DIR/x.tmp" -mindepth 1 -maxdepth 1 -type d | head -1)
    name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$top/package.json" 2>/dev/null || basename "$t" .tgz)
    mkdir -p "$NPM_DIR/pkg/$(dirname "$name")"
    rm -rf "$NPM_DIR/pkg/$name"
    mv "$top" "$NPM_DIR/pkg/$name"
    rm -rf "$NPM_DIR/x.tmp"
  done
  NPM_READY=1
  log "npm: $(find "$NPM_DIR/tgz" -name '*.tgz' | wc -l) packages unpacked in $(($(date +%s) - t0))s"
}

# npm_roots PKG|SUBDIR|CAP ... -> pick root specs (dest folder: @scope/name -> scope__name)
npm_roots() {
  local e pkg sub cap d
  for e in "$@"; do
    IFS='|' read -r pkg sub cap <<<"$e"
    d=${pkg#@}; d=${d//\//__}
    echo "$NPM_DIR/pkg/$pkg/$sub|$d/${sub#.}|$cap"
  done
}

# ---------------------------------------------------------------------------
# languages
# ---------------------------------------------------------------------------
fetch_javascript() {
  local out=$1 roots
  npm_fetch || return 1
  mapfile -t roots < <(npm_roots \
    "three|src|6" "webpack|lib|5" "eslint|lib|5" "svelte|src|4" "lodash|.|3" \
    "express|.|1" "koa|.|1" "ws|.|1" "axios|lib|2" "commander|.|1" "yargs|.|1" \
    "chalk|source|1" "mocha|lib|2" "knex|lib|2" "mongoose|lib|3" "moment|src|2" \
    "underscore|modules|2" "async|.|2" "jquery|src|2" "react|cjs|1" "react-dom|cjs|3" \
    "vue|dist|1" "preact|src|1" "date-fns|.|3" "rxjs|dist/esm|2" "d3|dist|1" \
    "@angular/core|fesm2022|3")
  pick "$out" --cap-mb "$CAP_MB" --ext .js,.mjs,.cjs --js-siblings \
    --exclude-dir node_modules,esm5,umd,bundles,min,locale,locales \
    --exclude-glob '*.production.*,*.prod.*,*-prod.*,*.bundle.*,*.profiling.*' "${roots[@]}"
}

fetch_typescript() {
  local out=$1 roots
  npm_fetch || return 1
  mapfile -t roots < <(npm_roots \
    "effect|src|9" "@effect/platform|src|3" "rxjs|src|3" "zod|src|3" \
    "@tanstack/query-core|src|2" "@tanstack/react-query|src|1" "@tanstack/router-core|src|2" \
    "@tanstack/store|src|1" "@tanstack/virtual-core|src|1" "immer|src|1" "mobx|src|2" \
    "@reduxjs/toolkit|src|3" "@trpc/server|src|3" "@trpc/client|src|1")
  log "typescript: implementation sources"
  pick "$out" --cap-mb "$CAP_MB" --ext .ts,.tsx,.mts,.cts --dts no --js-siblings \
    --exclude-dir node_modules "${roots[@]}"
  mapfile -t roots < <(npm_roots "typescript|lib|8" "@types/node|.|5" "kysely|dist/esm|2")
  log "typescript: declaration files"
  pick "$out" --cap-mb "$CAP_MB" --ext .ts,.mts,.cts --dts only --js-siblings \
    --exclude-dir node_modules,cs,de,es,fr,it,ja,ko,pl,pt-br,ru,tr,zh-cn,zh-tw "${roots[@]}"
}

fetch_go() {
  local out=$1 pkg src
  pkg=$(apt_pkgs_matching golang- '^golang-1\.[0-9]+-src$' | tail -1)
  if [[ -z $pkg ]]; then ensure_apt_lists; pkg=$(apt_pkgs_matching golang- '^golang-1\.[0-9]+-src$' | tail -1); fi
  [[ -n $pkg ]] || { warn "no golang-1.NN-src package in apt"; return 1; }
  log "go: $pkg"
  DEB_FILTER[$pkg]="*/src/*.go"
  apt_fetch "$WORK/deb" "$pkg" || return 1
  src=$(find "$WORK/deb/$pkg" -type d -path '*/go-1.*/src' -prune | head -1)
  [[ -n $src ]] || { warn "$pkg has no go-1.*/src"; return 1; }
  # stdlib (no cmd, no vendored deps) first, then the toolchain, then tests
  pick "$out" --cap-mb "$CAP_MB" --ext .go --exclude-glob '*_test.go' \
    --exclude-dir testdata,cmd,vendor "$src|std|0"
  pick "$out" --cap-mb "$CAP_MB" --ext .go --exclude-glob '*_test.go' \
    --exclude-dir testdata,vendor "$src/cmd|cmd|0"
  pick "$out" --cap-mb "$CAP_MB" --ext .go --include-glob '*_test.go' \
    --exclude-dir testdata,vendor,cmd "$src|std|0"
}

RUST_CRATES=(serde serde-json serde-derive regex regex-syntax aho-corasick memchr tokio
  tokio-util bytes futures-util hyper h2 http reqwest url syn quote proc-macro2 clap
  rand itertools anyhow thiserror log tracing crossbeam-channel rayon rayon-core nom
  chrono hashbrown indexmap smallvec parking-lot num-traits toml walkdir glob once-cell
  bitflags base64 semver)

fetch_rust() {
  local out=$1 r reg roots=() d c
  log "rust: rust-src + ${#RUST_CRATES[@]} librust-*-dev crates"
  local pkgs=(rust-src) c0
  for c0 in "${RUST_CRATES[@]}"; do pkgs+=("librust-$c0-dev"); done
  apt_fetch "$WORK/deb" "${pkgs[@]}" || return 1
  r=$(find "$WORK/deb/rust-src" -maxdepth 4 -type d -name 'rustc-*' 2>/dev/null | head -1)
  if [[ -n $r ]]; then
    for d in core alloc std proc_macro test; do roots+=("$r/library/$d/src|std/library/$d|0"); done
  else
    warn "rust-src not available; using crates only"
  fi
  # crate sources unpacked by librust-*-dev packages
  for reg in "$WORK"/deb/librust-*/usr/share/cargo/registry/*; do
    [[ -d $reg ]] || continue
    c=$(basename "$reg")
    roots+=("$reg|crates/$c|2")
  done
  if [[ -n $r ]]; then
    roots+=("$r/compiler|std/compiler|10" "$r/src/tools/rustfmt/src|std/tools/rustfmt/src|3" \
      "$r/src/tools/clippy/clippy_lints|std/tools/clippy_lints|3")
  fi
  ((${#roots[@]})) || { warn "no Rust sources found"; return 1; }
  pick "$out" --cap-mb "$CAP_MB" --ext .rs --exclude-dir target,testdata,test-data "${roots[@]}"
}

fetch_java() {
  local out=$1 z="" cand pkg cands=()
  # JAVA_SRC_ZIP=/path/src.zip picks the zip; JAVA_SRC_ZIP=apt skips local JDKs
  case ${JAVA_SRC_ZIP:-} in
    "") cands=(/usr/lib/jvm/java-17-openjdk-amd64/lib/src.zip /usr/lib/jvm/default-java/lib/src.zip /usr/lib/jvm/*/lib/src.zip) ;;
    apt) ;;
    *) cands=("$JAVA_SRC_ZIP") ;;
  esac
  for cand in "${cands[@]}"; do
    if [[ -f $cand ]] && python3 -c 'import zipfile,sys; zipfile.ZipFile(sys.argv[1])' "$cand" 2>/dev/null; then z=$(readlink -f "$cand"); break; fi
  done
  if [[ -z $z ]]; then
    ensure_apt_lists || true
    pkg=$(apt_pkgs_matching openjdk- '^openjdk-[0-9]+-source$' | tail -1)
    [[ -n $pkg ]] || { warn "no local JDK src.zip and no openjdk-NN-source package"; return 1; }
    log "java: no local src.zip, downloading $pkg"
    apt_fetch "$WORK/deb" "$pkg" || return 1
    z=$(find "$WORK/deb/$pkg" -name src.zip -type f | head -1)
    [[ -n $z ]] || { warn "$pkg has no src.zip"; return 1; }
  fi
  log "java: $z"
  local roots=() p
  for p in java.base/java/util java.base/java/io java.base/java/nio java.base/java/net \
           java.base/java/lang java.base/java/time java.base/java/text java.base/java/math \
           java.base/java/security; do
    roots+=("$p|$p|0")
  done
  roots+=("java.net.http/java|java.net.http/java|0" "java.net.http/jdk|java.net.http/jdk|2"
          "java.sql/java|java.sql/java|0" "java.logging/java|java.logging/java|0"
          "jdk.httpserver/com|jdk.httpserver/com|1" "java.compiler/javax|java.compiler/javax|1"
          "jdk.compiler/com/sun/tools/javac|jdk.compiler/com/sun/tools/javac|6"
          "java.base/jdk/internal/util|java.base/jdk/internal/util|1"
          "java.management/java|java.management/java|2" "jdk.jshell/jdk|jdk.jshell/jdk|2"
          "java.xml/javax|java.xml/javax|2")
  # skip generated tables and translated message bundles
  pick "$out" --cap-mb "$CAP_MB" --ext .java --zip "$z" --exclude-dir resources \
    --exclude-glob 'CharacterData*.java,*_ja.java,*_zh_CN.java,*_de.java' "${roots[@]}"
}

fetch_c() {
  local out=$1 p t roots=()
  log "c: glibc-source newlib-source libxcrypt-source + /usr/include"
  apt_fetch "$WORK/deb" glibc-source newlib-source libxcrypt-source || return 1
  # the *-source packages carry upstream tarballs: unpack only the C files
  # of the folders used below
  local glibc_dirs=(stdlib string stdio-common libio malloc posix io misc time nptl socket inet
                    resolv dirent elf iconv locale wcsmbs argp signal pwd grp login nss assert ctype
                    sysdeps/unix/sysv/linux sysdeps/x86_64)
  local pats d
  for p in glibc-source newlib-source; do
    [[ -d $WORK/deb/$p ]] || continue
    pats=()
    if [[ $p == glibc-source ]]; then
      for d in "${glibc_dirs[@]}"; do pats+=("*/$d/*.c" "*/$d/*.h"); done
    else
      pats=("*/newlib/libc/*.[ch]" "*/newlib/libm/common/*.[ch]")
    fi
    while IFS= read -r t; do
      mkdir -p "$WORK/src/$p"
      tar -xf "$t" -C "$WORK/src/$p" --no-same-owner --wildcards "${pats[@]}" 2>/dev/null || warn "could not unpack $t"
    done < <(find "$WORK/deb/$p" -name '*.tar.*' -type f)
  done
  local g n
  g=$(find "$WORK/src/glibc-source" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | head -1)
  n=$(find "$WORK/src/newlib-source" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | head -1)
  if [[ -n $g ]]; then
    for d in "${glibc_dirs[@]:0:26}"; do
      roots+=("$g/$d|glibc/$d|2")
    done
  fi
  [[ -n $n ]] && roots+=("$n/newlib/libc|newlib/libc|6" "$n/newlib/libm/common|newlib/libm/common|2")
  [[ -d $WORK/deb/libxcrypt-source/usr/src/libxcrypt ]] && roots+=("$WORK/deb/libxcrypt-source/usr/src/libxcrypt|libxcrypt|2")
  [[ -n $g ]] && roots+=("$g/sysdeps/unix/sysv/linux|glibc/sysdeps/unix/sysv/linux|4" "$g/sysdeps/x86_64|glibc/sysdeps/x86_64|2")
  ((${#roots[@]})) || { warn "no C sources found"; return 1; }
  pick "$out" --cap-mb "$CAP_MB" --ext .c,.h --exclude-dir 'testdata,ccs' \
    --exclude-glob 'tst-*,test-*,bug-*' "${roots[@]}"
  # locally installed C headers: the libc/POSIX ones at the top of /usr/include
  # first, then the arch and kernel folders, then the rest (C++ ones left out)
  local cxx_h='cursesapp.h,cursesf.h,cursesm.h,cursesp.h,cursesw.h,cursslk.h,etip.h,*xx.h,*++.h'
  pick "$out" --cap-mb "$CAP_MB" --ext .h --exclude-dir '*' --exclude-glob "$cxx_h" \
    "/usr/include|usr-include|3"
  pick "$out" --cap-mb "$CAP_MB" --ext .h --exclude-dir 'c++' --exclude-glob "$cxx_h" \
    "/usr/include/x86_64-linux-gnu|usr-include/x86_64-linux-gnu|2" \
    "/usr/include/linux|usr-include/linux|2" "/usr/include/asm-generic|usr-include/asm-generic|1"
  pick "$out" --cap-mb "$CAP_MB" --ext .h --exclude-glob "$cxx_h" \
    --exclude-dir 'c++,x86_64-linux-gnu,linux,asm-generic,node,llvm-*,unicode,boost,eigen3,qt*,Qt*,gtest,gmock,absl,fmt,spdlog,nlohmann,oneapi,tbb,catch2,CLI,rapidjson,python3*,GL,GLES*,X11' \
    "/usr/include|usr-include|4"
}

BOOST_LIBS=(asio beast container algorithm filesystem json optional variant2 smart_ptr
  unordered intrusive graph core system regex program_options date_time
  circular_buffer lockfree thread url)

fetch_cpp() {
  local out=$1 roots=() cxx boost b d
  cxx=$(ls -d /usr/include/c++/[0-9]* 2>/dev/null | sort -V | tail -1 || true)
  local pkgs=(googletest libabsl-dev libfmt-dev libspdlog-dev nlohmann-json3-dev catch2
              libcli11-dev rapidjson-dev libtbb-dev libeigen3-dev)
  boost=$(apt_pkgs_matching libboost '^libboost1\.[0-9]+-dev$' | tail -1)
  if [[ -n $boost ]]; then
    pkgs+=("$boost")
    DEB_FILTER[$boost]=$(printf './usr/include/boost/%s/* ' "${BOOST_LIBS[@]}")
  fi
  if [[ -z $cxx ]]; then
    local stdcxx
    stdcxx=$(apt_pkgs_matching libstdc++ '^libstdc\+\+-[0-9]+-dev$' | tail -1)
    [[ -n $stdcxx ]] && pkgs+=("$stdcxx")
  fi
  log "cpp: ${pkgs[*]}${cxx:+ + $cxx}"
  apt_fetch "$WORK/deb" "${pkgs[@]}" || return 1
  [[ -z $cxx ]] && cxx=$(ls -d "$WORK"/deb/libstdc++-*/usr/include/c++/[0-9]* 2>/dev/null | sort -V | tail -1 || true)
  # libstdc++: extensionless standard headers (<vector>, ...) get '.hpp' appended
  if [[ -n $cxx ]]; then
    pick "$out" --cap-mb "$CAP_MB" --ext .h,.hpp --suffix-ext none,.tcc --suffix .hpp \
      --exclude-dir 'x86_64-linux-gnu' "$cxx|libstdc++|8"
  fi
  d=$WORK/deb
  roots+=("$d/googletest/usr/src/googletest|googletest|3"
          "$d/libabsl-dev/usr/include/absl|abseil/absl|5"
          "$d/libfmt-dev/usr/include/fmt|fmt/fmt|1"
          "$d/libspdlog-dev/usr/include/spdlog|spdlog/spdlog|1"
          "$d/nlohmann-json3-dev/usr/include/nlohmann|nlohmann-json/nlohmann|2"
          "$d/catch2/usr/include/catch2|catch2/catch2|2"
          "$d/libcli11-dev/usr/include/CLI|cli11/CLI|1"
          "$d/rapidjson-dev/usr/include/rapidjson|rapidjson/rapidjson|1"
          "$d/libtbb-dev/usr/include/oneapi|tbb/oneapi|1"
          "$d/libeigen3-dev/usr/include/eigen3/Eigen/src|eigen/Eigen/src|4")
  if [[ -n $boost ]]; then
    b=$d/$boost/usr/include/boost
    for p in "${BOOST_LIBS[@]}"; do
      roots+=("$b/$p|boost/$p|2")
    done
  fi
  # locally installed C++ headers (LLVM), if any
  for p in /usr/include/llvm-[0-9]*/llvm; do [[ -d $p ]] && roots+=("$p|$(basename "$(dirname "$p")")/llvm|4"); done
  pick "$out" --cap-mb "$CAP_MB" --ext .h,.hpp,.hh,.hxx,.cc,.cpp,.cxx \
    --suffix-ext .tcc,.ipp --suffix .hpp \
    --exclude-dir 'testdata,CMakeFiles,cmake' "${roots[@]}"
}

# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------
declare -A STATUS
FAILED=0
for lang in "${LANGS[@]}"; do
  dir="$DEST/$lang"
  if ((!FORCE)) && [[ -f $STATE/$lang.done ]] && [[ -n $(ls -A "$dir" 2>/dev/null) ]]; then
    log "$lang: already populated, skipping (use --force to rebuild)"
    STATUS[$lang]="kept"
    continue
  fi
  rm -rf "$dir"; rm -f "$STATE/$lang.done"
  mkdir -p "$dir"
  log "$lang: fetching"
  t0=$(date +%s)
  if "fetch_$lang" "$dir" && [[ -n $(find "$dir" -type f -print -quit) ]]; then
    date -u +%FT%TZ >"$STATE/$lang.done"
    STATUS[$lang]="fetched ($(($(date +%s) - t0))s)"
  else
    warn "$lang: FAILED (see messages above)"
    STATUS[$lang]="FAILED"
    FAILED=1
  fi
  # free temp space between languages (npm tarballs are kept for js/ts)
  rm -rf "$WORK/deb" "$WORK/src" "$WORK/debs"
done

echo
printf '%-12s %8s %9s  %s\n' LANGUAGE FILES MB STATUS
printf '%-12s %8s %9s  %s\n' ------------ -------- --------- ------
tf=0; tb=0
for lang in "${ALL_LANGS[@]}"; do
  dir="$DEST/$lang"
  st=${STATUS[$lang]:-"not requested"}
  if [[ -d $dir ]]; then
    read -r f b < <(find "$dir" -type f -printf '%s\n' | awk '{n++; s+=$1} END {printf "%d %d\n", n, s}')
  else
    f=0; b=0
  fi
  tf=$((tf + f)); tb=$((tb + b))
  printf '%-12s %8d %9.1f  %s\n' "$lang" "$f" "$(awk -v b="$b" 'BEGIN{printf "%.1f", b/1048576}')" "$st"
done
printf '%-12s %8d %9.1f  %s\n' total "$tf" "$(awk -v b="$tb" 'BEGIN{printf "%.1f", b/1048576}')" "in $(($(date +%s) - START_TS))s -> $DEST"

if ((FAILED)); then
  echo "$PROG: some languages failed; rerun to retry them (completed ones are kept)" >&2
  exit 1
fi
