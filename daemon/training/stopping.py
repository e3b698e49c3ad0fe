"""Stopping a long `train-head` run with Ctrl-C or SIGTERM without losing work.

While a StopSignal is active the first SIGINT or SIGTERM only sets it: distillation checks it between batches and
training between steps, and each then stores what it has (the distilled sequences in the cache, a checkpoint) and
returns, so the same command resumes. A second signal acts as it would have without it.
"""

from __future__ import annotations

import signal
import threading


class TrainingStopped(Exception):
    """The run was stopped by a signal before it had anything to train (what it distilled is cached)."""


class StopSignal:
    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.received: int | None = None
        self._previous: dict[int, object] = {}

    def __bool__(self) -> bool:
        return self.received is not None

    def __enter__(self) -> "StopSignal":
        if threading.current_thread() is threading.main_thread():  # handlers can only be set there
            self._previous = {number: signal.signal(number, self._handle) for number in self.SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        self._restore()

    def _handle(self, number, frame) -> None:
        self.received = number
        self._restore()  # a second signal stops at once

    def _restore(self) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}
