"""Stopping a long `train-head` run with Ctrl-C or SIGTERM without losing work.

While a StopSignal is active the first SIGINT or SIGTERM only sets it: distillation checks it between batches and
training between steps, and each then stores what it has (the distilled sequences in the cache, a checkpoint) and
returns, so the same command resumes. A second signal acts as it would have without it.
"""

from __future__ import annotations

import signal
import sys
import threading


class TrainingStopped(Exception):
    """The run was stopped by a signal before it had anything to train (what it distilled is cached)."""

    signal: int | None = None  # the signal's number (SIGINT, SIGTERM)


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
        for each in self._previous:  # a second signal stops at once
            signal.signal(each, self._second)

    def _second(self, number, frame) -> None:
        """A second signal: the handlers go back to what they were and this one acts as it would have, or, where it
        was ignored (SIGINT in a job a script ran in the background), as by default: it was sent twice to stop."""
        previous = self._previous.get(number, signal.SIG_DFL)
        self._restore()
        print("\nstopping now: what is saved stays (the last checkpoint, the cached shards)", file=sys.stderr,
              flush=True)
        if callable(previous):
            previous(number, frame)  # (Python's default_int_handler raises KeyboardInterrupt)
        elif number == signal.SIGINT:
            raise KeyboardInterrupt
        else:
            signal.signal(number, signal.SIG_DFL)
            signal.raise_signal(number)

    def _restore(self) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}
