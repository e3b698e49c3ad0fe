"""`nestling profile`: measure the verification cost curve and the draft step cost on this device."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def add_parser(sub, add_model_options) -> None:
    p = sub.add_parser("profile", help="measure T_verify(W) and the draft step cost; cache and optionally plot them",
                       description="Measure the verification cost curve T_verify(W) and the draft step cost of this "
                                   "model, head, device and dtype, and save them in the cache (NESTLING_CACHE_DIR, "
                                   "profiles/), where the latency-aware modes read them.")
    p.add_argument("--context", type=int, default=300, help="committed tokens while measuring (default 300)")
    p.add_argument("--repeats", type=int, default=7,
                   help="rounds over all sizes; each size keeps its median, then the curve is made "
                        "non-decreasing (default 7)")
    p.add_argument("--plot", type=Path, help="write a PNG of the curve (needs matplotlib)")
    p.add_argument("--json", action="store_true", help="print the curve, the draft step and where they are saved as JSON")
    p.add_argument("--no-packed-weights", dest="packed_weights", action="store_false",
                   help="measure with the weights in torch's layout (by default packed for oneDNN where that pays)")
    p.add_argument("--no-exact-trees", dest="exact_trees", action="store_false",
                   help="measure with trees verified in one block (by default row by row where that is exact)")
    add_model_options(p)


def plot_curve(profile, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError("--plot needs matplotlib: pip install matplotlib") from None
    sizes = sorted(profile.verify_ms)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot(sizes, [profile.verify_ms[s] for s in sizes], marker="o", label="verify forward (fitted, non-decreasing)")
    medians = profile.measured.get("medians_ms")
    if medians:
        ax.scatter([int(s) for s in medians], list(medians.values()), marker="x", color="black", zorder=3,
                   label="medians measured")
    if profile.draft_step_ms:  # (0 without a head: nothing to draw)
        ax.axhline(profile.draft_step_ms, color="grey", linestyle="--",
                   label=f"one draft step ({profile.draft_step_ms:.1f} ms)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tokens verified in one forward (W)")
    ax.set_ylabel("ms (median)")
    m = profile.measured
    ax.set_title(f"{m.get('model')} on {m.get('device')} ({m.get('dtype', '').removeprefix('torch.')}), "
                 f"{profile.context_tokens}-token context", fontsize=9)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def run(args) -> int:
    from ..policy.cost_model import (CHECK_SPREAD, VERIFY_SIZES, CostProfile, check_spread, measure_shown,
                                     measured_busy, profile_path)
    from ..runtime import load_runtime

    from .bench import save_output
    from .bench_flags import check_outputs

    check_outputs(args)
    if args.context < 2 or args.repeats < 1:
        raise ValueError("--context must be at least 2 and --repeats at least 1")
    runtime = load_runtime(args.model, args.head, args.device, args.dtype, packed_weights=args.packed_weights,
                           exact_trees=args.exact_trees)
    positions = getattr(runtime.target.config, "max_position_embeddings", None)
    if positions and args.context + max(VERIFY_SIZES) > positions:
        raise ValueError(f"--context {args.context} and trees of up to {max(VERIFY_SIZES)} tokens exceed the model's "
                         f"{positions} positions: give --context {positions - max(VERIFY_SIZES)} at most")
    profile = measure_shown(runtime.target, runtime.tree_source, context_tokens=args.context, sizes=VERIFY_SIZES,
                            repeats=args.repeats)
    path = profile_path(profile.key)
    previous = CostProfile.read(path)  # the curve this one replaces, shown beside it
    profile.save(path)
    if measured_busy(profile):
        print(f"warning: other processes kept {profile.measured['busy_elsewhere']:.0%} of the CPU busy while measuring;"
              " the curve may be far too steep (trees too small): measure again when the machine is idle",
              file=sys.stderr)
    spread = check_spread(profile)
    if spread > CHECK_SPREAD:
        print(f"warning: the CPU's speed changed while measuring (a second pass over a few sizes disagreed with the "
              f"curve by {spread - 1:.0%} in every attempt); measure again when the machine is idle", file=sys.stderr)
    print(_report(args, runtime, profile, path, previous, spread), flush=True)
    if args.plot:
        save_output("plot", args.plot, lambda plot: plot_curve(profile, plot))
    return 0


def _report(args, runtime, profile, path: Path, previous, spread: float) -> str:
    """What `nestling profile` prints: JSON with --json, else the curve (and the one it replaces) in words."""
    if args.json:
        return json.dumps({"path": str(path), "plot": str(args.plot) if args.plot else None,
                           "packed_weights": runtime.target.packed_weights,
                           "exact_rows": runtime.target.exact_rows,
                           "verify_ms": profile.verify_ms, "draft_step_ms": profile.draft_step_ms,
                           "check_ms": profile.measured["check_ms"], "check_spread": round(spread, 4),
                           "attempt": profile.measured["attempt"],
                           "previous_verify_ms": previous.verify_ms if previous is not None else None,
                           "draft_step_over_one_token_forward": round(profile.draft_step_ms / profile.verify_ms[1], 4)})
    lines = [f"{runtime.summary()}; context {args.context}, saved to {path}"
             + (f"; plot: {args.plot}" if args.plot else ""),
             "W:  " + "".join(f"{w:>8}" for w in profile.verify_ms),
             "ms: " + "".join(f"{t:>8.1f}" for t in profile.verify_ms.values())]
    if previous is not None:  # the curve this one replaces, at the same sizes
        lines.append("was:" + "".join(f"{previous.verify_cost(w):>8.1f}" for w in profile.verify_ms)
                     + f"   (timed {previous.measured.get('at', 'at an unknown time')})")
    if runtime.tree_source is None:
        lines.append("one draft step: none timed (no draft head: --head none)")
    else:
        lines.append(f"one draft step: {profile.draft_step_ms:.2f} ms "
                     f"({profile.draft_step_ms / profile.verify_ms[1]:.1%} of a one-token verify forward)")
    lines.append(f"check: {', '.join(f'W={w} {t:.1f} ms' for w, t in profile.measured['check_ms'].items())} in a "
                 f"second pass ({spread - 1:.0%} apart in shape; attempt {profile.measured['attempt']})")
    return "\n".join(lines)
