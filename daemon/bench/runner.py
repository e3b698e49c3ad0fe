"""Run every mode on every prompt, side by side, and summarise speed, tau and output identity."""

from __future__ import annotations

import platform
from dataclasses import dataclass, field

import torch
from tqdm import tqdm

from ..context.fim import FimBudget, build_fim_prompt
from ..speculative.engine import SpeculativeEngine, StopRule
from .prompts import BenchPrompt


@dataclass
class ModeResult:
    mode: str
    tokens: int = 0  # output tokens over all prompts
    decode_ms: float = 0.0  # generation time after the first token
    total_ms: float = 0.0  # including prefill
    forwards: int = 0  # verify forwards
    emitted: int = 0  # tokens output by verify forwards (accepted + bonus)
    identical: int = 0  # prompts whose output equals the baseline's
    prompts: int = 0
    per_prompt: list[dict] = field(default_factory=list)

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
        speedup = self.decode_tokens_per_s / baseline.decode_tokens_per_s if baseline and baseline.decode_tokens_per_s else None
        return {
            "mode": self.mode, "prompts": self.prompts, "tokens": self.tokens, "tau": round(self.tau, 3),
            "decode_tokens_per_s": round(self.decode_tokens_per_s, 2),
            "total_tokens_per_s": round(self.total_tokens_per_s, 2),
            "speedup_vs_baseline": round(speedup, 3) if speedup else None,
            "identical_to_baseline": f"{self.identical}/{self.prompts}",
        }


def environment(runtime) -> dict:
    info = runtime.describe()
    info.update(torch=torch.__version__, threads=torch.get_num_threads(), machine=platform.machine(),
                processor=platform.processor() or platform.machine())
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def run_bench(target, engines: dict[str, SpeculativeEngine], prompts: list[BenchPrompt], max_tokens: int,
              budget: FimBudget = FimBudget(), progress: bool = True) -> dict[str, ModeResult]:
    """Every engine on every prompt, interleaved per prompt; the first engine is the baseline."""
    results = {mode: ModeResult(mode) for mode in engines}
    baseline = next(iter(engines))
    encoded = [build_fim_prompt(target.tokenizer, target.fim_tokens, p.prefix, p.suffix, p.path, budget) for p in prompts]
    for engine in engines.values():  # warm-up, not measured
        engine.generate(encoded[0].token_ids, stop=StopRule(max_new_tokens=4)).run()
    for prompt, fim in tqdm(list(zip(prompts, encoded)), desc="bench", unit="prompt", disable=not progress):
        reference = None
        for mode, engine in engines.items():
            generation = engine.generate(fim.token_ids, stop=StopRule(max_new_tokens=max_tokens)).run()
            stats = generation.stats
            result = results[mode]
            result.prompts += 1
            result.tokens += stats.new_tokens
            result.decode_ms += stats.total_ms - stats.first_token_ms
            result.total_ms += stats.total_ms
            result.forwards += stats.target_forwards
            result.emitted += sum(stats.accepted_lengths)
            if mode == baseline:
                reference = generation.tokens
            result.identical += int(generation.tokens == reference)
            result.per_prompt.append({"id": prompt.id, "kind": prompt.kind, "prompt_tokens": len(fim.token_ids),
                                      **{k: v for k, v in stats.to_dict().items()
                                         if k not in ("accepted_lengths", "tree_sizes")}})
    return results


def format_table(results: dict[str, ModeResult]) -> str:
    baseline = next(iter(results.values()))
    rows = [r.summary(baseline) for r in results.values()]
    header = f"{'mode':<14}{'prompts':>8}{'tokens':>8}{'tau':>7}{'decode tok/s':>14}{'e2e tok/s':>11}{'speedup':>9}{'identical':>11}"
    lines = [header, "-" * len(header)]
    for row in rows:
        speedup = f"{row['speedup_vs_baseline']:.2f}x" if row["speedup_vs_baseline"] else "-"
        lines.append(f"{row['mode']:<14}{row['prompts']:>8}{row['tokens']:>8}{row['tau']:>7.2f}"
                     f"{row['decode_tokens_per_s']:>14.2f}{row['total_tokens_per_s']:>11.2f}{speedup:>9}"
                     f"{row['identical_to_baseline']:>11}")
    return "\n".join(lines)
