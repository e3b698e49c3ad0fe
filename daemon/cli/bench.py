"""`nestling bench`: decoding modes side by side on the same prompts, in one run."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from ..modes import MODE_HELP, MODES, PEER_HELP, PEERS
from .bench_flags import DEFAULTS, MAX_TREE, OPTIONS, REFERENCE_TREE, check_flags, read_shape_variants

DEFAULT_PROMPTS = Path(__file__).resolve().parent.parent / "bench" / "data"


def add_parser(sub, add_model_options) -> None:
    modes = "; ".join(f"{m}: {h}" for m, h in {**MODE_HELP, **PEER_HELP}.items())
    p = sub.add_parser("bench", help="measure decoding modes side by side (AR vs speculative and its ablations)")
    p.add_argument("sources", nargs="*", type=Path,
                   help="source files/folders (cursor positions are picked deterministically), .jsonl prompt "
                        "files, or 'humaneval' (HumanEval's prompts; needs nestling[bench]; a file or folder of that "
                        "name here is read instead); "
                        f"default: the held-out files in {DEFAULT_PROMPTS}")
    p.add_argument("--per-file", type=int, default=4, help="cursor positions per source file (default 4)")
    p.add_argument("--limit", type=int,
                   help="use at most this many prompts, taken from the source files in turn (--target open: files; "
                        "lookup: sequences)")
    p.add_argument("--max-tokens", type=int,
                   help="tokens generated per prompt (default 64; --target grpc and open: 16, a keystroke's completion)")
    p.add_argument("--modes", default="ar,spec", help=f"comma-separated, the first is the baseline ({modes})")
    p.add_argument("--ablation", action="store_true", help="all modes: " + ",".join(MODES))
    p.add_argument("--peers", action="store_true",
                   help="also run the peer baselines (" + ", ".join(PEERS) + "): transformers' own generate, "
                        "greedy and with its prompt-lookup decoding, on the same prompts")
    p.add_argument("--temperature", type=float, default=0.0,
                   help="sample at this temperature (default 0: greedy); prompt i gets seed --seed + i in every mode")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus mass kept when sampling (default 1.0)")
    p.add_argument("--seed", type=int, help="the first prompt's sampling seed (default 0)")
    p.add_argument("--by-region", action="store_true", help="also report per syntax region at the cursor")
    p.add_argument("--shape-variants", type=Path, metavar="FILE.json",
                   help="also run `spec` with other tree shapes per syntax region, one mode spec@NAME per variant "
                        "named in the file, e.g. {\"narrow\": {\"all\": {\"top_k\": 4}, \"logic\": {\"depth\": 9}}} "
                        "(fields top_k, depth, min_prob; regions all, boilerplate, logic, comment, string, neutral; "
                        "what a variant leaves out keeps the shipped shape): to fit the region priors")
    p.add_argument("--no-draft-gate", dest="draft_gate", action="store_false",
                   help="eagle-latency, eagle-syntax and spec draft at every step (the gate's ablation)")
    p.add_argument("--no-packed-weights", dest="packed_weights", action="store_false",
                   help="keep the weights in torch's layout (the packing's ablation)")
    p.add_argument("--no-exact-trees", dest="exact_trees", action="store_false",
                   help="verify trees in one block, without giving each node plain decoding's bits (the ablation)")
    p.add_argument("--top-k", type=int, default=REFERENCE_TREE["top_k"],
                   help=f"eagle-ref and eagle-latency trees: children per node (default {REFERENCE_TREE['top_k']}, "
                        f"at most {MAX_TREE['top_k']})")
    p.add_argument("--depth", type=int, default=REFERENCE_TREE["depth"],
                   help=f"eagle-ref and eagle-latency trees: draft depth (default {REFERENCE_TREE['depth']}, at most "
                        f"{MAX_TREE['depth']})")
    p.add_argument("--total-tokens", type=int, default=REFERENCE_TREE["total_tokens"],
                   help=f"eagle-ref tree: nodes verified (default {REFERENCE_TREE['total_tokens']}, at most "
                        f"{MAX_TREE['total_tokens']:,})")
    p.add_argument("--target", choices=["engine", "grpc", "open", "syntax", "lookup", "type-through"],
                   default="engine",
                   help="engine: decoding modes in this process (default); grpc: keystroke latency against a "
                        "running daemon, prefix cache on and off; open: the first completion in a file just "
                        "opened (SOURCES, default the held-out files), with and without the prefill editors ask "
                        "for on opening, against a running daemon; syntax: incremental parse + region lookup "
                        "after a one-character edit in a 5,000-line file, per language; lookup: how often "
                        "prompt-lookup continuations hold, per matched n-gram length, on the target's own "
                        "continuations cached by train-head (--cache-dir); type-through: in this process, typing "
                        "the shown completion character by character at each prompt's cursor (SOURCES), with and "
                        "without the rest of the last completion offered to the drafter (--compare hint) or the "
                        "prefill ahead of the next keystroke (--compare ahead)")
    p.add_argument("--cache-dir", type=Path, help="--target lookup: a `nestling train-head --cache-dir` (or "
                                                  "one of its train/held_out folders)")
    p.add_argument("--file", type=Path, help="--target grpc: the document to type in (default: a 2,000-line "
                                             "file made of the held-out Python files)")
    p.add_argument("--line", type=int,
                   help="--target grpc: the line retyped (default: three quarters down the document, 1500 in the "
                        "default one)")
    p.add_argument("--keystrokes", type=int, default=12,
                   help="--target grpc: requests per cache setting; type-through: keystrokes per prompt")
    p.add_argument("--compare", choices=["hint", "ahead"], default="hint",
                   help="--target type-through: the setting compared, on and off (default hint)")
    p.add_argument("--pause-ms", type=float, default=300.0,
                   help="--target type-through --compare ahead: the user's pause between seeing a completion and "
                        "typing its first character (the prefill ahead runs meanwhile; default 300)")
    p.add_argument("--accept", action="store_true",
                   help="--target type-through: accept each completion whole instead of typing its first character")
    p.add_argument("--open-delay", type=float, metavar="SECONDS",
                   help="--target open: send the completion this long after the prefill instead of when it ends "
                        "(the user types before the prefill is done)")
    p.add_argument("--socket", help="--target grpc/open: the daemon's socket (default: the configured one)")
    p.add_argument("--tcp", help="--target grpc/open: the daemon's HOST:PORT instead of the socket")
    p.add_argument("--token",
                   help="--target grpc/open: bearer token, if the daemon requires one (default: the configured one)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--out", type=Path, help="also write the JSON results to this file")
    p.add_argument("--plot", type=Path, help="also draw decode tokens/s per region and mode to this PNG (matplotlib)")
    add_model_options(p)
    DEFAULTS.update(vars(p.parse_args([])))
    OPTIONS.update({a.dest: max(a.option_strings, key=len) for a in p._actions if a.option_strings})


def run(args) -> int:
    modes = check_flags(args)
    if args.target == "grpc":
        return run_typing(args)
    if args.target == "open":
        return run_openings(args)
    if args.target == "syntax":
        return run_syntax(args)
    if args.target == "lookup":
        return run_lookup(args)
    if args.target == "type-through":
        return run_type_through(args)

    from ..bench.prompts import collect
    from ..bench.runner import BenchInterrupted, environment, format_table, run_bench
    from ..policy.cost_model import BUSY_ELSEWHERE_LIMIT, busy_elsewhere, cpu_snapshot
    from ..runtime import load_runtime
    from ..speculative.drafter import TreeBudget

    shapes = read_shape_variants(args.shape_variants) if args.shape_variants else {}
    modes += [f"spec@{name}" for name in shapes]
    sampling = bench_sampling(args, modes)
    prompts = collect(args.sources or [DEFAULT_PROMPTS], args.per_file, args.limit)
    budget = TreeBudget(top_k=args.top_k, depth=args.depth, total_tokens=args.total_tokens)
    runtime = load_runtime(args.model, args.head, args.device, args.dtype, budget=budget, draft_gate=args.draft_gate,
                           packed_weights=args.packed_weights, exact_trees=args.exact_trees)
    before = cpu_snapshot()
    try:
        results = run_bench(runtime, modes, prompts, args.max_tokens, sampling=sampling, shapes=shapes)
        done = len(prompts)
    except BenchInterrupted as stop:
        if not stop.done:
            raise KeyboardInterrupt from None  # (nothing measured to report)
        results, done = stop.results, stop.done
        print(f"nestling bench: interrupted after {done} of {len(prompts)} prompts: the results below are theirs"
              + (f" (and go to {args.out})" if args.out else ""), file=sys.stderr)
    baseline = next(iter(results.values()))
    busy = busy_elsewhere(before, cpu_snapshot())
    report = {
        "environment": {**environment(runtime), "busy_elsewhere": None if busy is None else round(busy, 3)},
        "settings": {"max_tokens": args.max_tokens, "prompts": done, "eagle_ref_tree": vars(budget),
                     "sampling": vars(sampling),
                     "draft_gate": args.draft_gate, "packed_weights": runtime.target.packed_weights,
                     "exact_rows": runtime.target.exact_rows,
                     "shape_variants": {name: {region.value: vars(shape) for region, shape in table.items()}
                                        for name, table in shapes.items()},
                     "sources": [str(s) for s in (args.sources or [DEFAULT_PROMPTS])]},
        "modes": [r.summary(baseline) for r in results.values()],
        "by_region": {region: [r.by_region[region].summary(baseline.by_region.get(region))
                               for r in results.values() if region in r.by_region]
                      for region in sorted(baseline.by_region)},
        "per_prompt": {mode: r.per_prompt for mode, r in results.items()},
    }
    if done < len(prompts):
        report["settings"]["interrupted_after"] = f"{done} of {len(prompts)} prompts"
    if runtime._profile is not None:
        report["cost_profile"] = {"verify_ms": runtime.profile.verify_ms, "draft_step_ms": runtime.profile.draft_step_ms}

    def table() -> None:
        env = report["environment"]
        print(f"model {env['model']} on {env['device']} ({env['dtype']}), head {env['head']}, "
              f"{_count(done, 'prompt')}, up to {_count(args.max_tokens, 'new token')} each"
              + ("" if sampling.greedy else f", sampled (temperature {sampling.temperature}, top-p {sampling.top_p}, "
                                            f"seeds {sampling.seed} + prompt index)"))
        print(format_table(results, by_region=args.by_region))

    write_report(report, args, table)
    if busy is not None and busy > BUSY_ELSEWHERE_LIMIT:
        print(f"nestling bench: warning: other processes kept {busy:.0%} of the CPU busy during the run: its tokens/s "
              "and speedups are unreliable; measure again when the machine is idle", file=sys.stderr)
    if args.plot:
        save_output("plot", args.plot, lambda path: plot_regions(report, path))
    return 0 if done == len(prompts) else 130


def _count(n: int, noun: str) -> str:
    """`1 prompt`, `3 prompts`."""
    return f"{n:,} {noun}{'s' * (n != 1)}"


def bench_sampling(args, modes: list[str]):
    """The --temperature / --top-p / --seed of a bench run, checked before the model loads."""
    from ..speculative.accept import Sampling
    from .complete import check_sampling_flags, warn_unused_sampling_flags

    check_sampling_flags(args)
    warn_unused_sampling_flags(args, "bench")
    sampling = Sampling(temperature=args.temperature, top_p=args.top_p, seed=0 if args.seed is None else args.seed)
    peers = [mode for mode in modes if mode in PEERS]
    if not sampling.greedy and peers:
        raise ValueError(f"the peer baselines ({', '.join(peers)}) decode greedily only: leave out --temperature")
    return sampling


def run_typing(args) -> int:
    from tqdm import tqdm

    from ..bench.typing import default_document, replay, summarize

    from .complete import read_source

    try:
        text = read_source(args.file).replace("\r\n", "\n") if args.file else default_document()
    except ValueError as exc:
        raise ValueError(f"--file: {exc}") from None
    lines = len(text.splitlines())
    line = args.line if args.line is not None else max(1, lines * 3 // 4)  # (1500 of the default 2,000 lines)
    if not 1 <= line <= lines:
        raise ValueError(f"--line {line} is outside {args.file or 'the document'} (it has {lines:,} lines)")
    with serving_daemon(args) as client:
        bar = tqdm(total=2 * (args.keystrokes + 1), desc="typing", unit="request")
        runs = {setting: summarize(replay(client, text, line, args.keystrokes, args.max_tokens,
                                          cache=setting == "cache_on", progress=lambda: bar.update(1)))
                for setting in ("cache_on", "cache_off")}
        bar.close()
        daemon = client.stats()
    ratio = runs["cache_off"]["first_token_ms"]["p50"] / max(runs["cache_on"]["first_token_ms"]["p50"], 1e-9)
    report = {"daemon": {"model": daemon.model, "device": daemon.device, "dtype": daemon.dtype, "head": daemon.head},
              "document_lines": lines, "line": line, **runs,
              "first_token_speedup_from_cache": round(ratio, 2)}

    def table() -> None:
        print(f"{daemon.model} on {daemon.device} ({daemon.dtype}); retyping line {line} of a "
              f"{report['document_lines']}-line file, {args.keystrokes} keystrokes per setting")
        print_latency_rows("prefix cache", {setting.replace("cache_", ""): data for setting, data in runs.items()})
        print(f"median time to first token: {ratio:.1f}x faster with the prefix cache")

    write_report(report, args, table)
    return 0


def run_type_through(args) -> int:
    from tqdm import tqdm

    from ..bench.prompts import collect
    from ..bench.runner import environment
    from ..bench.type_through import COMPARISONS, replay, summarize
    from ..runtime import load_runtime
    from ..service.completion import CompletionService
    from ..service.config import ServiceConfig

    if args.pause_ms < 0:
        raise ValueError("--pause-ms must not be negative")
    prompts = collect(args.sources or [DEFAULT_PROMPTS], args.per_file, args.limit)
    runtime = load_runtime(args.model, args.head, args.device, args.dtype, draft_gate=args.draft_gate,
                           packed_weights=args.packed_weights, exact_trees=args.exact_trees)
    settings = COMPARISONS[args.compare]
    services = {setting: CompletionService(runtime, ServiceConfig(**fields)) for setting, fields in settings.items()}
    pause_ms = args.pause_ms if args.compare == "ahead" else 0.0
    with tqdm(total=len(prompts), desc="typing through", unit="prompt") as bar:
        results = replay(services, prompts, args.keystrokes, args.max_tokens, pause_ms, args.accept,
                         progress=lambda: bar.update(1))
    runs = {setting: {"after_a_keystroke": summarize(results, setting),
                      "first_at_the_position": summarize(results, setting, typed=False)} for setting in settings}
    typed = {setting: runs[setting]["after_a_keystroke"] for setting in settings}
    on, off = settings
    if not typed[on]["requests"]:
        raise ValueError("no completion was shown at these positions, so nothing was typed through")
    ratio = typed[off]["total_ms"]["p50"] / max(typed[on]["total_ms"]["p50"], 1e-9)
    report = {"environment": environment(runtime), "prompts": len(prompts), "keystrokes": args.keystrokes,
              "max_tokens": args.max_tokens, "compare": args.compare, "pause_ms": pause_ms, "accept": args.accept,
              **runs,
              "total_speedup_after_a_keystroke": round(ratio, 2), "requests": [vars(r) for r in results]}

    def table() -> None:
        env = report["environment"]
        print(f"{env['model']} on {env['device']} ({env['dtype']}), head {env['head']}; {len(prompts)} positions, up "
              f"to {args.keystrokes} keystrokes each, {'accepting' if args.accept else 'typing'} the completion shown"
              f"{f' after a {pause_ms:.0f} ms pause' if pause_ms else ''}; requests after a keystroke:")
        print(f"{'setting':<10}{'requests':>9}{'total p50':>11}{'p95':>9}{'mean':>9}{'TTFT p50':>10}{'tau':>7}"
              f"{'same':>7}{'guessed':>8}")
        for setting, row in typed.items():
            t = row["total_ms"]
            print(f"{setting:<10}{row['requests']:>9}{t['p50']:>11.1f}{t['p95']:>9.1f}{t['mean']:>9.1f}"
                  f"{row['first_token_ms_p50']:>10.1f}{row['tau']:>7.2f}"
                  f"{row['same_completion_as_the_other_setting']:>7}{row['prepared_ahead']:>8}")
        label = {"hint": "the hint", "ahead": "the prefill ahead"}[args.compare]
        print(f"median time to the whole completion after a keystroke: {ratio:.2f}x faster with {label}")

    write_report(report, args, table)
    return 0


def run_openings(args) -> int:
    from tqdm import tqdm

    from ..bench.prompts import SOURCE_SUFFIXES, source_files
    from ..bench.typing import DATA, replay_openings, summarize
    from .complete import read_source

    files = source_files(args.sources or [DATA])[: args.limit]
    if not files:
        raise ValueError(f"no source files in {', '.join(map(str, args.sources))} (those nestling benches: "
                         f"{', '.join(SOURCE_SUFFIXES)})")
    for path in files:  # (a binary or empty file was timed as if it were code)
        if not read_source(path).strip():
            raise ValueError(f"{path} is empty: there is nothing to complete in it")
    with serving_daemon(args) as client:
        with tqdm(total=2 * len(files), desc="opening", unit="request") as bar:
            results, prefill_ms = replay_openings(client, files, args.max_tokens, progress=lambda: bar.update(1),
                                                  delay_s=args.open_delay)
        daemon = client.stats()
    runs = {name: summarize([r for r in results if r.cache == prefilled])
            for name, prefilled in (("prefilled", True), ("not_prefilled", False))}
    ratio = runs["not_prefilled"]["first_token_ms"]["p50"] / max(runs["prefilled"]["first_token_ms"]["p50"], 1e-9)
    report = {"daemon": {"model": daemon.model, "device": daemon.device, "dtype": daemon.dtype, "head": daemon.head},
              "files": [p.name for p in files], "open_delay_s": args.open_delay, **runs,
              "prefill_ms": {"mean": round(sum(prefill_ms) / len(prefill_ms), 1), "max": round(max(prefill_ms), 1)},
              "first_token_speedup_from_prefill": round(ratio, 2)}

    def table() -> None:
        when = "when the prefill ends" if args.open_delay is None else f"{args.open_delay:g} s after the prefill starts"
        print(f"{daemon.model} on {daemon.device} ({daemon.dtype}); the first completion in each of {len(files)} "
              f"files just opened, mid-line two thirds down, sent {when}")
        print_latency_rows("opened", {name.replace("_", " "): data for name, data in runs.items()})
        print(f"prefill on opening: {report['prefill_ms']['mean']:.0f} ms mean, {report['prefill_ms']['max']:.0f} ms "
              f"max; median time to first token {ratio:.1f}x faster after it")
        prefilled = runs["prefilled"]
        if prefilled["reused_tokens"] < prefilled["prompt_tokens"] / 2:
            print(f"(the prefilled completions reused {prefilled['reused_tokens']:.0f} of their "
                  f"{prefilled['prompt_tokens']:.0f} prompt tokens on average: their cursors lie before the window the "
                  "prefill computed, so what differs is mostly the prompt, shorter once a document has a window, not "
                  "the prefill)")

    write_report(report, args, table)
    return 0


@contextmanager
def serving_daemon(args):
    """A client of the daemon at --socket / --tcp (default: the user's); a clear error if none serves there."""
    from ..grpc_api.client import Client, user_daemon

    address, token = user_daemon(args.socket, args.tcp, args.token)
    with Client(address, token) as client:
        if not client.serving():
            raise ValueError(f"no daemon serving at {address}; start one with `nestling serve --detach`")
        yield client


def write_report(report: dict, args, table: Callable[[], None]) -> None:
    """Print the report (JSON with --json, else `table()` prints it in words), then write the JSON to --out: a file
    that cannot be written loses nothing printed."""
    text = json.dumps(report, indent=2, default=str) + "\n"
    if args.json:
        print(text, end="", flush=True)
    else:
        table()
    if args.out:
        save_output("out", args.out, lambda path: Path(path).write_text(text))


def save_output(flag: str, path: Path, write: Callable[[Path], None]) -> None:
    """write(path) for --FLAG; an OSError (the disk filled during the run, ...) as a message naming the flag."""
    try:
        write(path)
    except OSError as exc:
        raise ValueError(f"--{flag} {path}: cannot write it ({exc.strerror or exc}); the results are printed "
                         "above") from None


def print_latency_rows(label: str, runs: dict) -> None:
    print(f"{label:<14}{'TTFT p50':>10}{'p95':>9}{'p99':>9}{'total p50':>11}{'p95':>9}{'p99':>9}"
          f"{'prompt tok':>12}{'reused':>9}{'server TTFT p50':>17}{'tokens':>8}{'tau':>6}")
    for setting, data in runs.items():
        f, t = data["first_token_ms"], data["total_ms"]
        print(f"{setting:<14}{f['p50']:>10.1f}{f['p95']:>9.1f}{f['p99']:>9.1f}{t['p50']:>11.1f}"
              f"{t['p95']:>9.1f}{t['p99']:>9.1f}{data['prompt_tokens']:>12.0f}{data['reused_tokens']:>9.0f}"
              f"{data['server_first_token_ms_p50']:>17.1f}{data['completion_tokens']:>8.1f}{data['tau']:>6.2f}")


def run_syntax(args) -> int:
    from ..bench.syntax_latency import measure

    results = measure()

    def table() -> None:
        print("one-character edit at a line end + incremental reparse + region at the cursor, 5,000-line files")
        print(f"{'language':<12}{'file':<22}{'median ms':>10}{'p95 ms':>9}{'max ms':>9}")
        for name, row in results.items():
            print(f"{name:<12}{row['file']:<22}{row['median_ms']:>10.2f}{row['p95_ms']:>9.2f}{row['max_ms']:>9.2f}")

    write_report(results, args, table)
    return 0


def run_lookup(args) -> int:
    from tqdm import tqdm

    from ..bench.lookup_calibration import format_rows, measure, summarize
    from ..speculative.lookup_drafter import LookupDrafter
    from ..training.dataset import load_shard

    if args.cache_dir is None:
        raise ValueError("--target lookup needs --cache-dir (a folder `nestling train-head --cache-dir` filled)")
    shards = sorted(args.cache_dir.glob("**/shard-*.safetensors"))
    if not shards:
        raise ValueError(f"{args.cache_dir}: no distilled shards (shard-*.safetensors) in it")
    drafter = LookupDrafter()

    def sequences():
        taken = 0
        for shard in shards:
            for seq in load_shard(shard):
                if args.limit is not None and taken >= args.limit:
                    return
                taken += 1
                yield seq.tokens, seq.prompt_length

    bar = tqdm(total=args.limit, desc="lookup", unit="seq")
    rows = summarize(measure(sequences(), drafter, progress=lambda: bar.update(1)))
    bar.close()
    report = {"cache_dir": str(args.cache_dir), "sequences": bar.n, "drafter": vars(drafter), "rows": rows}

    def table() -> None:
        print(f"prompt-lookup acceptance on {bar.n} distilled sequences from {args.cache_dir}")
        print(format_rows(rows))

    write_report(report, args, table)
    return 0


def plot_regions(report: dict, path: Path) -> None:
    """Grouped bars: decode tokens/s of each mode, overall and per region at the cursor."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError("--plot needs matplotlib: pip install matplotlib") from None
    groups = {"all": report["modes"], **report["by_region"]}
    modes = [m["mode"] for m in report["modes"]]
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(groups) * len(modes) / 3), 3.8))
    width = 0.8 / len(modes)
    for index, mode in enumerate(modes):
        values = [next((row["decode_tokens_per_s"] for row in rows if row["mode"] == mode), 0.0) for rows in groups.values()]
        ax.bar([g + index * width for g in range(len(groups))], values, width, label=mode)
    ax.set_xticks([g + width * (len(modes) - 1) / 2 for g in range(len(groups))])
    ax.set_xticklabels([f"{name}\n({rows[0]['prompts']} prompts)" for name, rows in groups.items()], fontsize=8)
    ax.set_ylabel("decode tokens/s")
    env = report["environment"]
    ax.set_title(f"{env['model']} on {env['device']} ({env['dtype']}), head {head_name(env['head'])}", fontsize=9)
    ax.legend(fontsize=7, ncol=3)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def head_name(head) -> str:
    """A head's name for a plot: its folder's, or for train-head's OUT/head the run's folder's (`head head` told
    nothing)."""
    path = Path(str(head))
    return path.parent.name if path.name == "head" and path.parent.name else path.name
