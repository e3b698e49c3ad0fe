"""Run every mode on every prompt, side by side, and summarise speed, tau and output identity,
overall and per syntax region."""

from __future__ import annotations

import platform
from dataclasses import dataclass, field, replace

import torch
from tqdm import tqdm

from ..context.fim import FimBudget, build_fim_prompt
from ..context.languages import find_language
from ..context.syntax import Region, SyntaxDocument
from ..service.stats import percentile
from ..speculative.accept import Sampling
from ..speculative.engine import StopRule
from ..modes import PEERS
from ..policy.shapes import ShapeTable
from .peers import PeerEngine
from .prompts import BenchPrompt


@dataclass
class ModeResult:
    mode: str
    tokens: int = 0  # output tokens over all prompts
    decode_ms: float = 0.0  # generation time after the first token
    total_ms: float = 0.0  # including prefill
    forwards: int = 0  # verify forwards
    emitted: int = 0  # tokens output by verify forwards (accepted + bonus)
    steps: int = 0  # decode steps whose tree is known (peer baselines report none)
    drafted: int = 0  # of those, steps that verified more than the root (the draft gate skips some)
    identical: int = 0  # prompts whose output equals the baseline's
    prompts: int = 0
    accepted_lengths: list[int] = field(default_factory=list)  # accepted + bonus the output took, one per forward
    per_prompt: list[dict] = field(default_factory=list)
    by_region: dict[str, "ModeResult"] = field(default_factory=dict)

    def add(self, stats, same_as_baseline: bool) -> None:
        self.prompts += 1
        self.tokens += stats.new_tokens
        self.decode_ms += stats.total_ms - stats.first_token_ms
        self.total_ms += stats.total_ms
        self.forwards += stats.target_forwards
        self.emitted += sum(stats.accepted_lengths)
        self.accepted_lengths.extend(stats.accepted_lengths)
        self.steps += len(stats.tree_sizes)
        self.drafted += sum(size > 1 for size in stats.tree_sizes)
        self.identical += int(same_as_baseline)

    @property
    def tau(self) -> float:
        return self.emitted / self.forwards if self.forwards else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        return (self.tokens - self.prompts) / (self.decode_ms / 1000) if self.decode_ms else 0.0

    @property
    def total_tokens_per_s(self) -> float:
        return self.tokens / (self.total_ms / 1000) if self.total_ms else 0.0

    def summary(self, baseline: "ModeResult | None") -> dict:
        speedup = None
        if baseline is not None and baseline.decode_tokens_per_s and self.decode_tokens_per_s:
            speedup = self.decode_tokens_per_s / baseline.decode_tokens_per_s
        return {
            "mode": self.mode, "prompts": self.prompts, "tokens": self.tokens, "tau": round(self.tau, 3),
            "decode_tokens_per_s": round(self.decode_tokens_per_s, 2),
            "total_tokens_per_s": round(self.total_tokens_per_s, 2),
            "speedup_vs_baseline": round(speedup, 3) if speedup else None,
            "identical_to_baseline": f"{self.identical}/{self.prompts}",
            # how deep the accepted paths go: what the region shape priors (policy/shapes.py) are read from
            "accepted_length_p50": percentile(self.accepted_lengths, 0.5),
            "accepted_length_p90": percentile(self.accepted_lengths, 0.9),
            "drafted_steps": round(self.drafted / self.steps, 3) if self.steps else None,
        }


class BenchInterrupted(Exception):
    """Ctrl-C during run_bench: `results` hold the `done` prompts every mode had finished (the one in progress is
    left out, so the modes still compare on the same prompts)."""

    def __init__(self, results: dict[str, ModeResult], done: int):
        super().__init__(f"interrupted after {done} prompts")
        self.results, self.done = results, done


def environment(runtime) -> dict:
    info = runtime.describe()
    info.update(torch=torch.__version__, threads=torch.get_num_threads(), machine=platform.machine(),
                processor=platform.processor() or platform.machine())
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def prompt_region(prompt: BenchPrompt) -> Region:
    language = find_language(None, prompt.path) if prompt.path else None
    return SyntaxDocument(prompt.prefix + prompt.suffix, language).region_at(len(prompt.prefix))


def run_bench(runtime, modes: list[str], prompts: list[BenchPrompt], max_tokens: int,
              budget: FimBudget = FimBudget(), progress: bool = True, sampling: Sampling = Sampling(),
              shapes: dict[str, ShapeTable] | None = None) -> dict[str, ModeResult]:
    """Every mode on every prompt, interleaved per prompt; the first mode is the baseline. Modes are
    nestling's (modes.py), peer baselines (peers.py: transformers' own generate, greedy only), or MODE@NAME: a
    syntax-shaped mode with the shape table `shapes[NAME]` in place of REGION_SHAPES (policy/shapes.py). The order
    rotates by one mode per prompt, so no mode always runs first on a fresh prompt (the cyclic order stays).
    `sampling`: greedy by default; sampled, prompt i is decoded with seed (sampling.seed or 0) + i in every mode,
    so each mode's output is still comparable with the baseline's token for token. Ctrl-C raises BenchInterrupted with
    what was measured; ValueError for --max-tokens that would run a prompt past the model's positions."""
    if not sampling.greedy and any(mode in PEERS for mode in modes):
        raise ValueError(f"the peer baselines ({', '.join(PEERS)}) decode greedily only")
    target = runtime.target
    shapes = shapes or {}
    engines = {mode: PeerEngine(target, mode) if mode in PEERS else runtime.engine(mode.partition("@")[0])
               for mode in modes}
    results = {mode: ModeResult(mode) for mode in modes}
    encoded = [build_fim_prompt(target.tokenizer, target.fim_tokens, p.prefix, p.suffix, p.path, budget) for p in prompts]
    longest = max(len(fim.token_ids) for fim in encoded)
    if target.positions and longest + 2 > target.positions:  # (bench times decoding after the first token)
        raise ValueError(f"the longest prompt's {longest:,} tokens leave no room for two new tokens in the "
                         f"{target.positions:,} positions of {target.name}")
    if target.positions and longest + max_tokens > target.positions:
        raise ValueError(f"--max-tokens {max_tokens:,} after the longest prompt's {longest:,} tokens runs past the "
                         f"{target.positions:,} positions of {target.name}: give --max-tokens "
                         f"{max(target.positions - longest, 0):,} at most")
    regions = [prompt_region(p) for p in prompts]
    for mode, engine in engines.items():  # warm-up, not measured
        engine.generate(encoded[0].token_ids, stop=StopRule(max_new_tokens=4),
                        budget=_budget(runtime, mode, shapes=shapes)).run()
    for index, (prompt, fim, region) in enumerate(tqdm(list(zip(prompts, encoded, regions)), desc="bench",
                                                       unit="prompt", disable=not progress)):
        stop = StopRule(max_new_tokens=max_tokens)
        try:
            generations = {mode: _generate(engines[mode], fim.token_ids, stop, _budget(runtime, mode, region, shapes),
                                           prompt_sampling(sampling, index)).run()
                           for mode in rotated(modes, index)}
        except KeyboardInterrupt:
            raise BenchInterrupted(results, index) from None
        reference = generations[modes[0]].tokens
        for mode in modes:
            tokens, stats = generations[mode].tokens, generations[mode].stats
            same = tokens == reference
            results[mode].add(stats, same)
            results[mode].by_region.setdefault(region.value, ModeResult(mode)).add(stats, same)
            results[mode].per_prompt.append({
                "id": prompt.id, "kind": prompt.kind, "region": region.value, "prompt_tokens": len(fim.token_ids),
                "identical": same, "first_difference": _first_difference(tokens, reference),
                **{k: v for k, v in stats.to_dict().items() if k not in ("accepted_lengths",)}})
    return results


def prompt_sampling(sampling: Sampling, index: int) -> Sampling:
    """The sampling for the bench's prompt `index`: its own seed, the same in every mode."""
    return sampling if sampling.greedy else replace(sampling, seed=((sampling.seed or 0) + index) % 2**64)


def _generate(engine, prompt: list[int], stop: StopRule, budget, sampling: Sampling):
    if isinstance(engine, PeerEngine):
        return engine.generate(prompt, stop=stop, budget=budget)
    return engine.generate(prompt, sampling, stop=stop, budget=budget)


def rotated(modes: list[str], shift: int) -> list[str]:
    """`modes` starting at position shift (mod len): the run order for one prompt."""
    start = shift % len(modes)
    return modes[start:] + modes[:start]


def _budget(runtime, mode: str, region: Region = Region.NEUTRAL, shapes: dict[str, ShapeTable] | None = None):
    """The tree budget of one of nestling's modes (MODE@NAME: with the shape table shapes[NAME]); peers draft their
    own way (None)."""
    if mode in PEERS:
        return None
    base, _, variant = mode.partition("@")
    return runtime.budget_for(base, region, shapes[variant]) if variant else runtime.budget_for(base, region)


def _first_difference(tokens: list[int], reference: list[int]) -> int | None:
    """The index of the first token where an output leaves the baseline's, None when they are equal."""
    if tokens == reference:
        return None
    return next((i for i, (a, b) in enumerate(zip(tokens, reference)) if a != b), min(len(tokens), len(reference)))


def format_table(results: dict[str, ModeResult], by_region: bool = False) -> str:
    baseline = next(iter(results.values()))
    header = (f"{'mode':<14}{'region':<13}{'prompts':>8}{'tokens':>8}{'tau':>7}{'decode tok/s':>14}"
              f"{'e2e tok/s':>11}{'speedup':>9}{'identical':>11}{'accepted p50/p90':>18}{'drafted':>9}")
    lines = [header, "-" * len(header)]

    def row(result: ModeResult, base: ModeResult | None, region: str) -> str:
        data = result.summary(base)
        speedup = f"{data['speedup_vs_baseline']:.2f}x" if data["speedup_vs_baseline"] else "-"
        drafted = f"{data['drafted_steps']:.0%}" if data["drafted_steps"] is not None else "-"
        return (f"{data['mode']:<14}{region:<13}{data['prompts']:>8}{data['tokens']:>8}{data['tau']:>7.2f}"
                f"{data['decode_tokens_per_s']:>14.2f}{data['total_tokens_per_s']:>11.2f}{speedup:>9}"
                f"{data['identical_to_baseline']:>11}"
                f"{str(data['accepted_length_p50']) + '/' + str(data['accepted_length_p90']):>18}"
                f"{drafted:>9}")

    for result in results.values():
        lines.append(row(result, baseline, "all"))
    if by_region:
        for region in sorted(baseline.by_region):
            lines.append("")
            for result in results.values():
                if region in result.by_region:
                    lines.append(row(result.by_region[region], baseline.by_region[region], region))
    return "\n".join(lines)
