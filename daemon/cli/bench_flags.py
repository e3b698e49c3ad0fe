"""`nestling bench`'s flags, checked before anything loads: a run of minutes that ignored a flag, or failed on one at its
end, would measure (or lose) something other than what was asked."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from ..modes import MODES, PEERS

REFERENCE_TREE = {"top_k": 10, "depth": 7, "total_tokens": 60}  # the EAGLE-2 reference defaults (TreeBudget's)
# the largest eagle-ref tree bench takes: a tree's attention mask grows with its square (a 100,000-node tree took all
# 24 GiB of a machine's memory), and 1,024 nodes is 17 times the reference's 60; depth and top-k beyond 64 only cost
MAX_TREE = {"top_k": 64, "depth": 64, "total_tokens": 1024}
# the modes each tree flag shapes (the other modes size their trees from the cost profile and the syntax)
TREE_FLAG_MODES = {"top_k": ("eagle-ref", "eagle-latency"), "depth": ("eagle-ref", "eagle-latency"),
                   "total_tokens": ("eagle-ref",)}

DEFAULTS: dict = {}  # bench's flags as left out (add_parser fills it), to tell the flags a user gave
OPTIONS: dict = {}  # each flag's name on the command line, by its attribute (draft_gate: --no-draft-gate)

# flags that apply to some targets only: given with another, they are refused (they would be ignored in silence)
TARGETS_OF = {
    "modes": ("engine",), "ablation": ("engine",), "peers": ("engine",), "by_region": ("engine",),
    "top_k": ("engine",), "depth": ("engine",), "total_tokens": ("engine",),
    "per_file": ("engine", "type-through"), "max_tokens": ("engine", "grpc", "open", "type-through"),
    "draft_gate": ("engine", "type-through"), "packed_weights": ("engine", "type-through"),
    "exact_trees": ("engine", "type-through"),
    "model": ("engine", "type-through"), "head": ("engine", "type-through"), "device": ("engine", "type-through"),
    "dtype": ("engine", "type-through"),
    "file": ("grpc",), "line": ("grpc",), "keystrokes": ("grpc", "type-through"),
    "compare": ("type-through",), "accept": ("type-through",), "pause_ms": ("type-through",),
    "open_delay": ("open",), "socket": ("grpc", "open"), "tcp": ("grpc", "open"), "token": ("grpc", "open"),
    "cache_dir": ("lookup",),
}


def given_flags(args) -> list[str]:
    """The flags of TARGETS_OF given on the command line (their values differ from those left out)."""
    return [name for name in TARGETS_OF if name in DEFAULTS and getattr(args, name, None) != DEFAULTS[name]]


def check_flags_apply(args) -> None:
    """Flags another --target would take, refused before anything loads (a run of minutes that ignored one would
    measure something other than what was asked)."""
    stray = [name for name in given_flags(args) if args.target not in TARGETS_OF[name]]
    if stray:
        names = ", ".join(f"{OPTIONS[name]} (for --target {' or '.join(TARGETS_OF[name])})" for name in stray)
        raise ValueError(f"--target {args.target} does not take {names}: drop {'it' if len(stray) == 1 else 'them'}")
    if "pause_ms" in given_flags(args) and args.target == "type-through" and args.compare != "ahead":
        raise ValueError("--pause-ms applies to --compare ahead only")


def check_outputs(args) -> None:
    """--out and --plot are checked before a run of minutes, not when its results are written: each must be a file
    that can be written (it is opened for appending, which leaves one that exists as it is, and one made is removed)."""
    for flag in ("out", "plot"):
        path = getattr(args, flag, None)
        if path is None:
            continue
        path = Path(path)
        if str(path) in ("", "."):
            raise ValueError(f"--{flag} needs a file name")
        if path.parent.exists() and not path.parent.is_dir():
            raise ValueError(f"--{flag} {path}: {path.parent} is a file, not a folder")
        if not path.parent.is_dir():
            raise ValueError(f"--{flag} {path}: the folder {path.parent} does not exist")
        if path.is_dir():
            raise ValueError(f"--{flag} {path}: a folder; give a file name")
        existed = path.exists()
        try:
            with open(path, "a"):
                pass
        except OSError as exc:
            raise ValueError(f"--{flag} {path}: cannot write it ({exc.strerror or exc})") from None
        if not existed:
            path.unlink(missing_ok=True)
    if getattr(args, "plot", None) and Path(args.plot).suffix.lower() != ".png":
        raise ValueError(f"--plot {args.plot}: the plot is a PNG image; give a file name ending in .png")
    if getattr(args, "plot", None) and importlib.util.find_spec("matplotlib") is None:
        raise ValueError("--plot needs matplotlib: pip install matplotlib")


def read_shape_variants(path: Path) -> dict:
    """--shape-variants: the named shape tables in a JSON file (policy/shapes.py, shape_variants)."""
    from ..policy.shapes import shape_variants

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"--shape-variants {path}: cannot read it ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ValueError(f"--shape-variants {path}: not valid JSON ({exc})") from None
    return shape_variants(data)


# the targets that measure something else than SOURCES, and what
SOURCELESS_TARGETS = {"grpc": "it types in --file, by default a 2,000-line file made of the held-out files",
                      "syntax": "it edits 5,000-line files it writes, one per language",
                      "lookup": "it reads the continuations cached in --cache-dir"}


def check_flags(args) -> list[str]:
    """ValueError for flags that do not go together, out of range, or outputs that cannot be written; fills in the
    --max-tokens default. Returns the modes to run (for --target engine; [] for the others)."""
    check_flags_apply(args)
    check_outputs(args)
    check_values(args)
    return engine_modes(args) if args.target == "engine" else []


def check_values(args) -> None:
    """Counts out of range, and flags that do not go with the --target given."""
    if args.max_tokens is None:
        args.max_tokens = 16 if args.target in ("grpc", "open") else 64
    for flag in ("limit", "keystrokes", "max_tokens", "per_file", "top_k", "depth", "total_tokens"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise ValueError(f"--{flag.replace('_', '-')} must be at least 1, not {value}")
    for flag, most in MAX_TREE.items():
        if getattr(args, flag) > most:
            raise ValueError(f"--{flag.replace('_', '-')} {getattr(args, flag):,}: bench takes at most {most:,} (the "
                             f"reference tree's is {REFERENCE_TREE[flag]})")
    if args.target == "engine" and args.max_tokens < 2:
        raise ValueError("--max-tokens must be at least 2: decode tokens/s are timed after the first token")
    if args.open_delay is not None and not args.open_delay >= 0:
        raise ValueError(f"--open-delay must not be negative, not {args.open_delay:g}")
    if args.limit is not None and args.target in ("grpc", "syntax"):
        raise ValueError(f"--limit does not apply to --target {args.target} (it measures "
                         f"{'--keystrokes requests' if args.target == 'grpc' else 'one file per language'})")
    if args.plot and args.target != "engine":
        raise ValueError(f"--plot draws the decoding modes' tokens/s per region; --target {args.target} has no plot")
    if args.target != "engine" and (args.temperature, args.top_p, args.seed) != (0.0, 1.0, None):
        raise ValueError(f"--temperature, --top-p and --seed apply to the decoding modes, not --target {args.target}")
    if args.target != "engine" and args.shape_variants:
        raise ValueError(f"--shape-variants applies to the decoding modes, not --target {args.target}")
    if args.sources and args.target in SOURCELESS_TARGETS:
        raise ValueError(f"--target {args.target} takes no SOURCES ({SOURCELESS_TARGETS[args.target]}); "
                         f"drop {' '.join(str(s) for s in args.sources)}")


def engine_modes(args) -> list[str]:
    """--modes (or --ablation, --peers) as a list of known modes, each once, that the tree flags given apply to."""
    modes = list(MODES) if args.ablation else [m.strip() for m in args.modes.split(",") if m.strip()]
    repeated = sorted({m for m in modes if modes.count(m) > 1})
    if repeated:  # each would run again and count its prompts twice
        raise ValueError(f"--modes names {', '.join(repeated)} more than once: give each mode once")
    modes += [peer for peer in PEERS if args.peers and peer not in modes]
    unknown = [m for m in modes if m not in MODES + PEERS]
    if not modes:
        raise ValueError(f"--modes names no mode: give one or more of {', '.join(MODES + PEERS)}, comma-separated")
    if unknown:
        raise ValueError(f"unknown mode{'s' * (len(unknown) > 1)} {', '.join(unknown)} (known: "
                         f"{', '.join(MODES + PEERS)})")
    for name, shaped in TREE_FLAG_MODES.items():
        if name in given_flags(args) and not set(shaped) & set(modes):
            raise ValueError(f"{OPTIONS[name]} shapes the trees of {' or '.join(shaped)}, which --modes does not "
                             "run: add one (or --ablation)")
    headless = [m for m in modes if m.startswith("eagle")]
    if headless and args.head == "none":  # (None: the default head)
        others = [m for m in modes if m not in headless]
        raise ValueError(f"--head none: {', '.join(headless)} draft with a head (or a draft model); give one"
                         + (f", or --modes {','.join(others)}" if others else ""))
    return modes
