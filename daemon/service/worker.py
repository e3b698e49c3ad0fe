"""One worker thread owns the model. The asyncio server never runs model code itself: it submits jobs
and awaits their futures. A newer job for the same document from the same client supersedes older ones: queued ones are
answered Superseded at once (and skipped), a running one stops at its next speculative step. Prefills (files just opened) are the lowest
priority: any completion request, and a newer prefill, supersedes every prefill queued or running (a
running one stops between chunks, keeping what it did). When a completion ends and nothing else waits, the
worker queues a prefill ahead (the prompt the completion's first typed character gives) at that priority, and
when that one is done and still nothing waits, the next guess (the completion accepted whole)."""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable

from .completion import (CompletionRequest, CompletionResult, CompletionService, DeadlineExceeded, PrefillRequest,
                         PrefillResult, Superseded)
from .stats import ServiceStats

log = logging.getLogger(__name__)


DEADLINE_SLACK_S = 0.1  # a client's cancel this close to the deadline is the deadline's: the client cancels at its
# own, which the daemon's trails by the time the request took to arrive and be read (tens of ms on a busy CPU: QA
# counted 13 of 24 calls past their deadline as cancelled)


@dataclass
class Job:
    request: CompletionRequest | PrefillRequest
    on_text: Callable[[str], None] | None = None  # called on the worker thread with each new piece of text
    future: Future = field(default_factory=Future)  # CompletionResult / PrefillResult, or the exception that ended it
    cancel: threading.Event = field(default_factory=threading.Event)
    queued_at: float = field(default_factory=time.monotonic)
    superseded: bool = False
    started: bool = False  # the worker took it up (set under the worker's lock; until then a newer job answers it)
    number: int = 0
    then: list[PrefillRequest] = field(default_factory=list)  # prefills ahead to queue after this one, while nothing else waits
    cancelled_at: float | None = None  # time.monotonic() when its client cancelled it (ModelWorker.cancel)


class ModelWorker:
    def __init__(self, service: CompletionService, stats: ServiceStats):
        self.service = service
        self.stats = stats
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._lock = threading.Lock()
        self._live: dict[str, list[Job]] = {}  # uri -> queued or running jobs
        self._counter = itertools.count(1)
        self._thread = threading.Thread(target=self._run, name="nestling-model-worker", daemon=True)
        self._thread.start()

    def submit(self, request: CompletionRequest | PrefillRequest, on_text: Callable[[str], None] | None = None
               ) -> Job:
        job = Job(request, on_text, number=next(self._counter))
        with self._lock:
            for uri, jobs in self._live.items():
                for older in jobs:
                    if older.cancel.is_set():  # its client cancelled it (or it was superseded before): counted so
                        continue
                    if isinstance(older.request, PrefillRequest) or (isinstance(request, CompletionRequest) and (
                            uri, older.request.client) == (request.uri, request.client)):
                        older.superseded = True
                        older.cancel.set()  # a running job stops at its next step; a queued one is skipped
                        if not older.started and not older.future.done():  # its caller hears now, not when skipped
                            older.future.set_exception(Superseded(older.request.uri))
            self._live.setdefault(request.uri, []).append(job)
        self._queue.put(job)
        return job

    def cancel(self, job: Job) -> None:
        """The client went away: stop the job (a no-op once it finished)."""
        job.cancelled_at = job.cancelled_at or time.monotonic()
        job.cancel.set()

    def stop(self, timeout: float | None = 30.0) -> None:
        """Finish the job in progress, drop the queue, end the thread."""
        self._queue.put(None)
        self._thread.join(timeout)

    def pending(self) -> int:
        return self._queue.qsize()

    def _finish(self, job: Job) -> None:
        with self._lock:
            jobs = self._live.get(job.request.uri, [])
            if job in jobs:
                jobs.remove(job)
            if not jobs:
                self._live.pop(job.request.uri, None)

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                self._drain()
                return
            with self._lock:  # after this, submit() leaves the job's future to this thread
                job.started = not job.cancel.is_set()
            if not job.started or not job.future.set_running_or_notify_cancel():
                self._finish(job)
                if isinstance(job.request, CompletionRequest):
                    self._record_unanswered(job)
                if not job.future.done():
                    job.future.set_exception(Superseded(job.request.uri))
                continue
            if isinstance(job.request, PrefillRequest):
                self._prefill(job)
                continue
            result = self._complete(job)
            if result is not None:
                self._queue_ahead(self._guesses(job.request, result))

    def _complete(self, job: Job) -> CompletionResult | None:
        try:
            result: CompletionResult = self.service.complete(job.request, job.cancel, job.on_text, job.queued_at)
        except (Superseded, DeadlineExceeded) as exc:
            self._record_unanswered(job)
            job.future.set_exception(exc)
        except Exception as exc:  # an engine failure: report it, keep serving
            log.exception("completion failed for %s", job.request.uri)
            self.stats.count("errors")
            job.future.set_exception(exc)
        else:
            self.stats.record(result.stats)
            job.future.set_result(result)
            return result
        finally:
            self._finish(job)
        return None

    def _record_unanswered(self, job: Job) -> None:
        """Count a completion that ended without an answer: superseded by a newer one for its document, past its
        deadline (whether the engine saw it first or the transport cancelled the call for it), or cancelled by its
        client."""
        deadline = job.request.deadline
        if job.superseded:
            self.stats.count("superseded")
        elif deadline is not None and (job.cancelled_at or time.monotonic()) >= deadline - DEADLINE_SLACK_S:  # (as of
            # the client's cancel)
            self.stats.count("deadline_exceeded")
        else:
            self.stats.count("cancelled")

    def _guesses(self, request: CompletionRequest, result: CompletionResult) -> list[PrefillRequest]:
        try:
            return self.service.prefill_ahead_requests(request, result)
        except Exception:  # a guess only: never worth the worker
            log.exception("no prefill ahead for %s", request.uri)
            return []

    def _queue_ahead(self, guesses: list[PrefillRequest]) -> None:
        """Queue the first prefill ahead (the others follow it), unless any job is queued or running (checked under
        the lock that `submit` holds while it registers a job, so a job arriving meanwhile is never queued behind
        it; a later one supersedes it as any prefill)."""
        if not guesses:
            return
        with self._lock:
            if any(self._live.values()):
                return
            job = Job(guesses[0], number=next(self._counter), then=guesses[1:])
            self._live[job.request.uri] = [job]
            self._queue.put(job)

    def _prefill(self, job: Job) -> None:
        try:
            result: PrefillResult = self.service.prefill(job.request, job.cancel)
        except Exception as exc:  # as for completions: report it, keep serving
            log.exception("prefill failed for %s", job.request.uri)
            job.future.set_exception(exc)
            return
        finally:
            self._finish(job)
        log.info("prefilled %s%s: %d of %d prompt tokens computed, %d reused, %.0f ms%s", job.request.uri,
                 f" ahead (guess {job.request.ahead})" if job.request.ahead else "", result.prefilled_tokens,
                 result.prompt_tokens, result.reused_tokens, result.total_ms,
                 "" if result.complete else " (interrupted)")
        self.stats.record_prefill(result, ahead=bool(job.request.ahead))
        job.future.set_result(result)
        if result.complete:
            self._queue_ahead(job.then)

    def _drain(self) -> None:
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            if job is not None and not job.future.done():
                job.future.set_exception(Superseded("shutting down"))
