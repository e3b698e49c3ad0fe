"""Latency against a running daemon, as an editor sees it. Keystrokes: a line retyped character by character,
a completion request after each keystroke, with the session's prefix cache on (one document) and off (a new
document each time), in one run. Openings: the first completion in a file just opened, after the prefill an
editor's didOpen asks for (the cursor unknown: the end of the file) and without it, side by side."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from ..service.stats import percentile

DATA = Path(__file__).parent / "data"


def default_document(lines: int = 2000) -> str:
    """A long Python file made of the held-out benchmark files, repeated."""
    sources = [p.read_text() for p in sorted(DATA.glob("*.py"))]
    text_lines: list[str] = []
    while len(text_lines) < lines:
        for source in sources:
            text_lines += source.split("\n")
    return "\n".join(text_lines[:lines]) + "\n"


@dataclass
class Keystroke:
    cache: bool  # the prompt's state was prepared: the session's previous request (typing) or a prefill (opening)
    first_token_ms: float  # request sent -> first streamed piece (client side)
    total_ms: float  # request sent -> final chunk
    reused_tokens: int
    prompt_tokens: int
    server_first_token_ms: float  # the daemon's own count: request dequeued -> first token (no transport)
    tokens: int = 0  # the completion's tokens
    tau: float = 0.0  # tokens per target forward (the daemon's count)


def replay(client, text: str, line: int, keystrokes: int, max_tokens: int, cache: bool, progress=None) -> list[Keystroke]:
    """Retype line `line` (1-based) of `text`: `keystrokes` characters, one request after each."""
    from ...proto import completion_pb2 as pb
    from ..grpc_api.client import full_text_request

    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        raise ValueError(f"--line {line} is outside the document (it has {len(lines)} lines)")
    target_line = lines[line - 1] or "    value = compute(value)"
    head = "\n".join(lines[: line - 1]) + ("\n" if line > 1 else "")
    tail = "\n" + "\n".join(lines[line:])
    indent = len(target_line) - len(target_line.lstrip())
    typed_base = target_line[:indent]
    results = []
    run_id = time.monotonic_ns()
    for index in range(keystrokes + 1):  # the first request warms the session; it is not counted
        typed = typed_base + target_line[indent : indent + index % max(1, len(target_line) - indent) + 1]
        document = head + typed + tail
        uri = f"file:///bench/typing-{run_id}.py" if cache else f"file:///bench/typing-{run_id}-{index}.py"
        request = full_text_request(uri, document, len(head) + len(typed), "python", max_tokens=max_tokens,
                                    line_mode=pb.LINE_MODE_SINGLE)
        keystroke = _timed(client, request, cache)
        if index > 0:
            results.append(keystroke)
        if progress:
            progress()
    return results


def replay_openings(client, files: list[Path], max_tokens: int, progress=None, delay_s: float | None = None
                    ) -> tuple[list[Keystroke], list[float]]:
    """Open each file twice as a new document, complete in the middle of the first non-blank line from two thirds
    down: once after a prefill at the end of the text (as `nestling lsp` asks on didOpen), once without. The
    completion waits for the prefill to finish, or with `delay_s` is sent that long after it (the user types
    before the prefill is done: it is interrupted). Returns the completions (cache = prefilled) and the
    prefills' milliseconds on the daemon."""
    from ...proto import completion_pb2 as pb
    from ..grpc_api.client import full_text_request, prefill_request

    results, prefill_ms = [], []
    run_id = time.monotonic_ns()
    for index, path in enumerate(files):
        text = path.read_text(encoding="utf-8", errors="replace")
        cursor = mid_line(text, len(text) * 2 // 3)
        for prefilled in ((True, False) if index % 2 == 0 else (False, True)):  # alternate which goes first
            uri = f"file:///bench/open-{run_id}-{'prefilled' if prefilled else 'cold'}/{path.name}"
            request = full_text_request(uri, text, cursor, max_tokens=max_tokens, line_mode=pb.LINE_MODE_SINGLE)
            if prefilled:
                opened = client.prefill_future(prefill_request(uri, text, len(text)), timeout=600)
                if delay_s is None:
                    opened.result()
                else:
                    time.sleep(delay_s)
            results.append(_timed(client, request, prefilled))
            if prefilled:
                prefill_ms.append(opened.result().total_ms)
            if progress:
                progress()
    return results, prefill_ms


def mid_line(text: str, offset: int) -> int:
    """The middle of the code on the first non-blank line at or after `offset` (the text's end if none)."""
    start = text.rfind("\n", 0, offset) + 1
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        code = text[start:end].lstrip()
        if code.strip():
            return end - len(code) + len(code) // 2
        start = end + 1
    return len(text)


def _timed(client, request, cache: bool) -> Keystroke:
    """One streamed completion, timed client side."""
    sent = time.perf_counter()
    first = final = None
    for chunk in client.stream(request, timeout=600):
        if first is None:
            first = time.perf_counter()
        if chunk.done:
            final = chunk
    done = time.perf_counter()
    return Keystroke(cache, (first - sent) * 1000, (done - sent) * 1000, final.stats.reused_prefix_tokens,
                     final.stats.prompt_tokens, final.stats.time_to_first_token_ms, final.stats.tokens,
                     final.stats.tau)


def summarize(results: list[Keystroke]) -> dict:
    first = [r.first_token_ms for r in results]
    total = [r.total_ms for r in results]
    return {
        "keystrokes": len(results),
        "first_token_ms": {"p50": round(statistics.median(first), 1), "p95": round(percentile(first, 0.95), 1),
                           "p99": round(percentile(first, 0.99), 1)},
        "total_ms": {"p50": round(statistics.median(total), 1), "p95": round(percentile(total, 0.95), 1),
                     "p99": round(percentile(total, 0.99), 1)},
        "server_first_token_ms_p50": round(statistics.median(r.server_first_token_ms for r in results), 1),
        "prompt_tokens": round(statistics.mean(r.prompt_tokens for r in results), 1),
        "reused_tokens": round(statistics.mean(r.reused_tokens for r in results), 1),
        "completion_tokens": round(statistics.mean(r.tokens for r in results), 1),
        "tau": round(statistics.mean(r.tau for r in results), 2),
    }
