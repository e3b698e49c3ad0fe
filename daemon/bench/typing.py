"""Keystroke latency against a running daemon: a line retyped character by character, a completion
request after each keystroke, with the session's prefix cache on (one document) and off (a new document
each time), in one run."""

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
    cache: bool
    first_token_ms: float  # request sent -> first streamed piece (client side)
    total_ms: float  # request sent -> final chunk
    reused_tokens: int
    prompt_tokens: int
    server_first_token_ms: float  # the daemon's own count: request dequeued -> first token (no transport)


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
        sent = time.perf_counter()
        first = None
        final = None
        for chunk in client.stream(request, timeout=600):
            if first is None:
                first = time.perf_counter()
            if chunk.done:
                final = chunk
        done = time.perf_counter()
        if index > 0:
            results.append(Keystroke(cache, (first - sent) * 1000, (done - sent) * 1000,
                                     final.stats.reused_prefix_tokens, final.stats.prompt_tokens,
                                     final.stats.time_to_first_token_ms))
        if progress:
            progress()
    return results


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
    }
