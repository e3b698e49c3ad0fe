"""Typing through the ghost text, in this process: at each cursor position a completion is asked for, then the
user types its text one character at a time (as when accepting a suggestion by typing it), with a request after
each keystroke. Two completion services on one model take the same keystrokes (those the first one's completions
lead to) in alternating order; their completions must be the same (in float32 exactly; in bfloat16 up to
numerical near-ties, as any two tree shapes). Two comparisons:

- hint: offering the rest of the document's last completion to the drafter (`follow_last_completion`) or not;
- ahead: with the hint, prefilling ahead of the next request (`prefill_ahead`) or not. The user pauses `pause_ms`
  between seeing a completion and typing its first character (or accepting it whole); meanwhile the service
  prefills the prompts its guesses give, interrupted when the pause ends. A request after the keystroke first
  waits for the prefill's current chunk to end; that wait counts in its time.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass

from ..service.stats import percentile

# per comparison, the settings compared (the first one's completions are typed) and their ServiceConfig fields
COMPARISONS = {
    "hint": {"hint": {"follow_last_completion": True, "prefill_ahead": False},
             "no_hint": {"follow_last_completion": False, "prefill_ahead": False}},
    "ahead": {"ahead": {"follow_last_completion": True, "prefill_ahead": True},
              "no_ahead": {"follow_last_completion": True, "prefill_ahead": False}},
}


@dataclass
class TypedRequest:
    setting: str  # a key of the comparison's settings
    index: int  # the prompt's
    keystroke: int  # 0: the first request at the position (nothing typed yet)
    total_ms: float  # the service's wall time for the request, plus waited_ms
    first_token_ms: float  # the service's, plus waited_ms
    tokens: int
    tau: float
    text: str  # the first completion item ("" if none)
    waited_ms: float = 0.0  # for the running prefill ahead to reach its next chunk boundary
    prepared_ahead: bool = False  # a prefill ahead had computed the request's prompt


def prefill_during_pause(service, request, result, pause_ms: float) -> float:
    """Run the service's prefills ahead of `request` (which gave `result`) one after the other while the user pauses,
    as the model worker does: interrupted when the pause ends. Returns how long after the pause the running one went
    on (what the next request waits), in ms."""
    guesses = service.prefill_ahead_requests(request, result) if pause_ms > 0 else []
    if not guesses:
        return 0.0
    cancel = threading.Event()
    timer = threading.Timer(pause_ms / 1000, cancel.set)
    started = time.perf_counter()
    timer.start()
    for guess in guesses:
        if not service.prefill(guess, cancel).complete:
            break
    timer.cancel()
    return max(0.0, (time.perf_counter() - started) * 1000 - pause_ms)


def replay(services: dict, prompts, keystrokes: int, max_tokens: int, pause_ms: float = 0.0, accept: bool = False,
           progress=None) -> list[TypedRequest]:
    """At each prompt's cursor: one request, then up to `keystrokes` more, each after typing the first character of
    the completion the first service's last request showed, or with `accept` after accepting it whole (the
    position ends early where it showed none)."""
    from ..service.completion import CompletionRequest

    results: list[TypedRequest] = []
    run_id = time.monotonic_ns()
    settings = list(services)
    for index, prompt in enumerate(prompts):
        prefix, suffix, ghost = prompt.prefix, prompt.suffix, ""
        waits = dict.fromkeys(settings, 0.0)
        for keystroke in range(keystrokes + 1):
            if keystroke:
                if not ghost:
                    break  # nothing shown to type through
                prefix += ghost if accept else ghost[0]
            texts = {}
            for setting in settings if (index + keystroke) % 2 == 0 else settings[::-1]:
                uri = f"file:///bench/type-through-{run_id}-{setting}/{index}/{prompt.path or 'prompt'}"
                request = CompletionRequest(uri=uri, text=prefix + suffix, cursor=len(prefix), max_tokens=max_tokens)
                started = time.perf_counter()
                result = services[setting].complete(request)
                total_ms = (time.perf_counter() - started) * 1000 + waits[setting]
                texts[setting] = result.items[0].text if result.items else ""
                results.append(TypedRequest(setting, index, keystroke, total_ms,
                                            result.stats.time_to_first_token_ms + waits[setting],
                                            result.stats.tokens, result.stats.tau, texts[setting], waits[setting],
                                            result.stats.prepared_ahead))
                waits[setting] = prefill_during_pause(services[setting], request, result, pause_ms)
            ghost = texts[settings[0]]
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
        "prepared_ahead": sum(r.prepared_ahead for r in rows),
        "waited_for_a_prefill_ms_mean": round(statistics.mean(r.waited_ms for r in rows), 1),
    }
