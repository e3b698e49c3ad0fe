"""Counters and latency percentiles over the daemon's lifetime (thread-safe)."""

from __future__ import annotations

import threading
import time
from collections import deque


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


UNANSWERED = ("errors", "superseded", "cancelled", "deadline_exceeded")  # the counters of requests not answered


class ServiceStats:
    def __init__(self, window: int = 2000):
        self.started = time.monotonic()
        self.requests = 0
        self.errors = 0  # failed: the engine raised (a failure of the daemon's own)
        self.superseded = 0  # replaced by a newer request for the same document
        self.cancelled = 0  # the client went away (cancelled the call, closed the connection) before the answer
        self.deadline_exceeded = 0  # the request's deadline passed before its completion ended
        self.prefills = 0
        self.prefilled_tokens = 0
        self.prefills_ahead = 0  # prefills of a guessed next request's prompt (not counted in prefills)
        self.prefills_ahead_used = 0  # requests that found such a prefill ready (the guess was right)
        self._tau_sum = 0.0
        self._first_token: deque[float] = deque(maxlen=window)
        self._total: deque[float] = deque(maxlen=window)
        self._lock = threading.Lock()

    def record(self, stats) -> None:
        with self._lock:
            self.requests += 1
            self.prefills_ahead_used += stats.prepared_ahead
            self._tau_sum += stats.tau
            self._first_token.append(stats.time_to_first_token_ms + stats.queue_ms)
            self._total.append(stats.total_ms + stats.queue_ms)

    def record_prefill(self, result, ahead: bool = False) -> None:
        with self._lock:
            if ahead:
                self.prefills_ahead += 1
            else:
                self.prefills += 1
                self.prefilled_tokens += result.prefilled_tokens

    def count(self, counter: str) -> None:
        """One more of an unanswered kind: "errors", "superseded", "cancelled" or "deadline_exceeded"."""
        assert counter in UNANSWERED, counter
        with self._lock:
            setattr(self, counter, getattr(self, counter) + 1)

    def snapshot(self) -> dict:
        with self._lock:
            first, total = list(self._first_token), list(self._total)
            return {
                "uptime_s": time.monotonic() - self.started, "requests": self.requests, "errors": self.errors,
                "superseded": self.superseded, "cancelled": self.cancelled,
                "deadline_exceeded": self.deadline_exceeded, "prefills": self.prefills, "prefilled_tokens": self.prefilled_tokens,
                "prefills_ahead": self.prefills_ahead, "prefills_ahead_used": self.prefills_ahead_used,
                "mean_tau": self._tau_sum / self.requests if self.requests else 0.0,
                "first_token": {p: percentile(first, f) for p, f in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))},
                "total": {p: percentile(total, f) for p, f in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))},
            }
