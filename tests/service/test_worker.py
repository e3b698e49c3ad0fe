"""The model worker's priorities, with a stand-in service: a prefill gives way to any completion request and
to a newer prefill; a prefill never interrupts a completion."""

import threading

import pytest

from nestling.daemon.service.completion import (CompletionRequest, CompletionResult, PrefillRequest, PrefillResult,
                                                Superseded)
from nestling.daemon.service.stats import ServiceStats
from nestling.daemon.service.worker import ModelWorker


class StandInService:
    """prefill() runs until cancelled (or released); complete() runs until released."""

    def __init__(self):
        self.started = threading.Event()  # set when any job starts
        self.release = threading.Event()
        self.log: list[str] = []

    def prefill(self, request, cancel):
        self.log.append(f"prefill {request.uri}")
        self.started.set()
        for _ in range(500):  # "chunks": a cancel is seen within one
            if cancel.is_set() or self.release.is_set():
                break
            cancel.wait(0.01)
        return PrefillResult(prompt_tokens=100, prefilled_tokens=7, complete=not cancel.is_set())

    def complete(self, request, cancel, on_text, queued_at):
        self.log.append(f"complete {request.uri}")
        self.started.set()
        self.release.wait(5)
        return CompletionResult()


@pytest.fixture
def worker():
    service = StandInService()
    worker = ModelWorker(service, ServiceStats())
    yield worker
    service.release.set()
    worker.stop()


def prefill(uri):
    return PrefillRequest(uri=uri, text="x = 1\n", cursor=6)


def completion(uri):
    return CompletionRequest(uri=uri, text="x = 1\n", cursor=6)


@pytest.mark.parametrize("uri", ["file:///a.py", "file:///b.py"])
def test_a_completion_request_interrupts_a_running_prefill(worker, uri):
    first = worker.submit(prefill("file:///a.py"))
    assert worker.service.started.wait(5)
    then = worker.submit(completion(uri))
    result = first.future.result(5)
    assert isinstance(result, PrefillResult) and not result.complete and result.prefilled_tokens == 7
    worker.service.release.set()
    assert isinstance(then.future.result(5), CompletionResult)
    assert worker.stats.snapshot()["prefills"] == 1 and worker.stats.snapshot()["prefilled_tokens"] == 7
    assert worker.stats.snapshot()["superseded"] == 0  # prefills are not counted as superseded requests


def test_a_newer_prefill_replaces_older_ones(worker):
    running = worker.submit(prefill("file:///a.py"))
    assert worker.service.started.wait(5)
    queued = worker.submit(prefill("file:///b.py"))
    newest = worker.submit(prefill("file:///c.py"))
    assert not running.future.result(5).complete
    with pytest.raises(Superseded):
        queued.future.result(5)
    worker.service.release.set()
    assert newest.future.result(5).complete
    assert worker.service.log == ["prefill file:///a.py", "prefill file:///c.py"]


def test_a_prefill_waits_for_a_running_completion_and_does_not_cancel_it(worker):
    running = worker.submit(completion("file:///a.py"))
    assert worker.service.started.wait(5)
    later = worker.submit(prefill("file:///a.py"))
    assert not running.cancel.is_set()
    worker.service.release.set()
    assert isinstance(running.future.result(5), CompletionResult)
    assert later.future.result(5).complete
    assert worker.service.log == ["complete file:///a.py", "prefill file:///a.py"]
