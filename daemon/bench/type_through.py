"""Typing through the ghost text, in this process: at each cursor position a completion is asked for, then the
user types its text one character at a time (as when accepting a suggestion by typing it), with a request after
each keystroke. Two completion services on one model, one offering the rest of the document's last completion to
the drafter (`follow_last_completion`) and one not, take the same keystrokes (those the first one's completions
lead to) in alternating order; their completions must be the same (in float32 exactly; in bfloat16 up to
numerical near-ties, as any two tree shapes)."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from ..service.stats import percentile

SETTINGS = ("hint", "no_hint")  # follow_last_completion on / off


@dataclass
class TypedRequest:
    setting: str  # one of SETTINGS
    index: int  # the prompt's
    keystroke: int  # 0: the first request at the position (nothing typed yet)
    total_ms: float  # the service's wall time for the request
    first_token_ms: float
    tokens: int
    tau: float
    text: str  # the first completion item ("" if none)


def replay(services: dict, prompts, keystrokes: int, max_tokens: int, progress=None) -> list[TypedRequest]:
    """At each prompt's cursor: one request, then up to `keystrokes` more, each after typing the first character of
    the completion the last request showed (the position ends early where it showed none)."""
    from ..service.completion import CompletionRequest

    results: list[TypedRequest] = []
    run_id = time.monotonic_ns()
    for index, prompt in enumerate(prompts):
        prefix, suffix, ghost = prompt.prefix, prompt.suffix, ""
        for keystroke in range(keystrokes + 1):
            if keystroke:
                if not ghost:
                    break  # nothing shown to type through
                prefix += ghost[0]
            texts = {}
            order = SETTINGS if (index + keystroke) % 2 == 0 else SETTINGS[::-1]
            for setting in order:
                uri = f"file:///bench/type-through-{run_id}-{setting}/{index}/{prompt.path or 'prompt'}"
                request = CompletionRequest(uri=uri, text=prefix + suffix, cursor=len(prefix), max_tokens=max_tokens)
                started = time.perf_counter()
                result = services[setting].complete(request)
                total_ms = (time.perf_counter() - started) * 1000
                texts[setting] = result.items[0].text if result.items else ""
                results.append(TypedRequest(setting, index, keystroke, total_ms, result.stats.time_to_first_token_ms,
                                            result.stats.tokens, result.stats.tau, texts[setting]))
            ghost = texts["hint"]
        if progress:
            progress()
    return results


def summarize(results: list[TypedRequest], setting: str, typed: bool = True) -> dict:
    """Latency and tau of one setting's requests after a keystroke (typed) or at a fresh position (not typed)."""
    rows = [r for r in results if r.setting == setting and (r.keystroke > 0) == typed]
    others = {(r.index, r.keystroke): r.text for r in results if r.setting != setting}
    if not rows:
        return {"requests": 0}
    total = [r.total_ms for r in rows]
    tokens = sum(r.tokens for r in rows)
    return {
        "requests": len(rows),
        "total_ms": {"p50": round(statistics.median(total), 1), "p95": round(percentile(total, 0.95), 1),
                     "mean": round(statistics.mean(total), 1)},
        "first_token_ms_p50": round(statistics.median(r.first_token_ms for r in rows), 1),
        "tokens": tokens,
        "tau": round(sum(r.tau * r.tokens for r in rows) / max(tokens, 1), 2),  # weighted by tokens written
        "same_completion_as_the_other_setting": sum(others.get((r.index, r.keystroke)) == r.text for r in rows),
    }
