"""The model worker's priorities, with a stand-in service: a prefill gives way to any completion request and
to a newer prefill; a prefill never interrupts a completion; a completion that ends with nothing else waiting is
followed by the service's prefill ahead of the next keystroke."""

import threading
import time

import pytest

from nestling.daemon.service.completion import (CompletionRequest, CompletionResult, DeadlineExceeded, PrefillRequest,
                                                PrefillResult, Superseded)
from nestling.daemon.service.stats import ServiceStats
from nestling.daemon.service.worker import DEADLINE_SLACK_S, ModelWorker


class StandInService:
    """prefill() runs until cancelled (or released); complete() runs until released."""

    def __init__(self):
        self.started = threading.Event()  # set when any job starts
        self.release = threading.Event()
        self.log: list[str] = []
        self.ahead = False  # whether a completion is followed by a prefill ahead

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

    def prefill_ahead_requests(self, request, result):
        return [PrefillRequest(uri=request.uri, text=request.text + typed, cursor=request.cursor + len(typed),
                               ahead=number) for number, typed in enumerate(("y", "yz"), start=1)] if self.ahead else []


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


def wait_for(condition, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_completion_is_followed_by_a_prefill_ahead_that_the_next_request_interrupts(worker):
    service = worker.service
    service.ahead = True
    service.complete = lambda request, cancel, on_text, queued_at: service.log.append("complete") or CompletionResult()
    assert isinstance(worker.submit(completion("file:///a.py")).future.result(5), CompletionResult)
    wait_for(lambda: service.log == ["complete", "prefill file:///a.py"])  # runs until interrupted
    assert isinstance(worker.submit(completion("file:///a.py")).future.result(5), CompletionResult)
    wait_for(lambda: worker.stats.snapshot()["prefills_ahead"] == 1 and len(service.log) == 4)
    assert service.log == ["complete", "prefill file:///a.py", "complete", "prefill file:///a.py"]
    snapshot = worker.stats.snapshot()
    assert snapshot["requests"] == 2 and snapshot["prefills"] == 0 and snapshot["prefilled_tokens"] == 0


def test_a_completed_prefill_ahead_is_followed_by_the_next_guess(worker):
    service = worker.service
    service.ahead = True
    service.release.set()  # each prefill ends at once, complete
    assert isinstance(worker.submit(completion("file:///a.py")).future.result(5), CompletionResult)
    wait_for(lambda: worker.stats.snapshot()["prefills_ahead"] == 2)
    assert service.log == ["complete file:///a.py", "prefill file:///a.py", "prefill file:///a.py"]


def test_no_prefill_ahead_while_another_job_waits(worker):
    worker.service.ahead = True
    first = worker.submit(completion("file:///a.py"))
    assert worker.service.started.wait(5)
    second = worker.submit(completion("file:///b.py"))
    worker.service.release.set()
    first.future.result(5), second.future.result(5)
    wait_for(lambda: worker.stats.snapshot()["prefills_ahead"] == 2)  # b's two guesses, none for a
    assert worker.service.log == ["complete file:///a.py", "complete file:///b.py"] + ["prefill file:///b.py"] * 2


def test_a_failing_guess_leaves_the_worker_serving(worker):
    def broken(request, result):
        raise RuntimeError("no guess")

    worker.service.prefill_ahead_requests = broken
    worker.service.release.set()
    for _ in range(2):
        assert isinstance(worker.submit(completion("file:///a.py")).future.result(5), CompletionResult)


def test_a_queued_completion_is_answered_superseded_as_soon_as_a_newer_one_comes(worker):
    running = worker.submit(completion("file:///a.py"))
    assert worker.service.started.wait(5)
    queued = worker.submit(completion("file:///b.py"))
    newer = worker.submit(completion("file:///b.py"))
    with pytest.raises(Superseded):  # answered while the running job still holds the worker
        queued.future.result(5)
    assert not running.future.done()
    worker.service.release.set()
    assert isinstance(running.future.result(5), CompletionResult)
    assert isinstance(newer.future.result(5), CompletionResult)
    wait_for(lambda: worker.stats.snapshot()["superseded"] == 1)
    assert worker.service.log == ["complete file:///a.py", "complete file:///b.py"]


def test_requests_for_the_same_document_from_two_clients_do_not_supersede_each_other(worker):
    """(Two editors with the same file open, or each with its "untitled:Untitled-1", had starved each other.)"""
    running = worker.submit(CompletionRequest(uri="untitled:Untitled-1", client="editor A", text="x", cursor=1))
    assert worker.service.started.wait(5)
    other = worker.submit(CompletionRequest(uri="untitled:Untitled-1", client="editor B", text="y", cursor=1))
    newer = worker.submit(CompletionRequest(uri="untitled:Untitled-1", client="editor B", text="yz", cursor=2))
    assert not running.cancel.is_set()
    with pytest.raises(Superseded):  # editor B's older request, by its newer one
        other.future.result(5)
    worker.service.release.set()
    assert isinstance(running.future.result(5), CompletionResult)
    assert isinstance(newer.future.result(5), CompletionResult)
    wait_for(lambda: worker.stats.snapshot()["superseded"] == 1)


def unanswered(worker) -> dict:
    snapshot = worker.stats.snapshot()
    return {key: snapshot[key] for key in ("superseded", "cancelled", "deadline_exceeded", "errors", "requests")}


def test_a_completion_its_client_cancels_counts_as_cancelled_and_not_as_a_failure(worker):
    def until_cancelled(request, cancel, on_text, queued_at):
        worker.service.started.set()
        cancel.wait(5)
        raise Superseded(request.uri)

    worker.service.complete = until_cancelled
    running = worker.submit(completion("file:///a.py"))
    assert worker.service.started.wait(5)
    queued = worker.submit(completion("file:///b.py"))
    worker.cancel(queued)  # gone before it started
    worker.cancel(running)
    for job in (running, queued):
        with pytest.raises(Superseded):
            job.future.result(5)
    wait_for(lambda: unanswered(worker)["cancelled"] == 2)
    assert unanswered(worker) == {"superseded": 0, "cancelled": 2, "deadline_exceeded": 0, "errors": 0, "requests": 0}


def test_a_completion_past_its_deadline_counts_as_that_whichever_way_it_stopped(worker, caplog):
    def stopped_by_the_deadline(request, cancel, on_text, queued_at):
        raise DeadlineExceeded("deadline passed after 3 tokens")

    def stopped_by_the_transport(request, cancel, on_text, queued_at):  # the call's own deadline cancels it
        cancel.set()
        raise Superseded(request.uri)

    for complete in (stopped_by_the_deadline, stopped_by_the_transport):
        worker.service.complete = complete
        job = worker.submit(CompletionRequest(uri="file:///a.py", text="x = 1\n", cursor=6,
                                              deadline=time.monotonic() - 0.001))
        with pytest.raises((DeadlineExceeded, Superseded)):
            job.future.result(5)
    wait_for(lambda: unanswered(worker)["deadline_exceeded"] == 2)
    assert unanswered(worker) == {"superseded": 0, "cancelled": 0, "deadline_exceeded": 2, "errors": 0, "requests": 0}
    assert "completion failed" not in caplog.text  # a deadline is the client's limit, not the daemon's failure


def test_a_failing_completion_counts_as_an_error(worker):
    def broken(request, cancel, on_text, queued_at):
        raise RuntimeError("the engine broke")

    worker.service.complete = broken
    with pytest.raises(RuntimeError):
        worker.submit(completion("file:///a.py")).future.result(5)
    wait_for(lambda: unanswered(worker)["errors"] == 1)
    assert unanswered(worker) == {"superseded": 0, "cancelled": 0, "deadline_exceeded": 0, "errors": 1, "requests": 0}


def test_a_completion_its_client_cancelled_is_not_superseded_by_the_next_keystroke(worker):
    def until_cancelled(request, cancel, on_text, queued_at):
        worker.service.started.set()
        if not cancel.wait(2):
            return CompletionResult()  # (the next request, not cancelled)
        time.sleep(0.2)  # (still running when the next request comes)
        raise Superseded(request.uri)

    worker.service.complete = until_cancelled
    running = worker.submit(completion("file:///a.py"))
    assert worker.service.started.wait(5)
    worker.cancel(running)  # the editor cancels, then asks again at once (LSP's $/cancelRequest, then a request)
    worker.submit(completion("file:///a.py"))
    with pytest.raises(Superseded):
        running.future.result(5)
    wait_for(lambda: unanswered(worker)["cancelled"] == 1)
    assert unanswered(worker)["superseded"] == 0


def test_a_completion_its_client_cancelled_before_its_deadline_counts_as_cancelled_when_the_deadline_passed_since(
        worker):
    running = worker.submit(completion("file:///a.py"))
    assert worker.service.started.wait(5)
    queued = worker.submit(CompletionRequest(uri="file:///b.py", text="x = 1\n", cursor=6,
                                             deadline=time.monotonic() + 0.5))
    worker.cancel(queued)  # cancelled while queued, then picked up after its deadline
    time.sleep(0.6)
    worker.service.release.set()
    running.future.result(5)
    wait_for(lambda: unanswered(worker)["cancelled"] == 1)
    assert unanswered(worker)["deadline_exceeded"] == 0


def test_a_cancel_just_before_the_deadline_is_the_deadlines(worker):
    """(QA: a client cancels at its own deadline, which the daemon's trails by the request's way to it: on a busy CPU
    13 of 24 calls past their deadline counted as cancelled.)"""
    running = worker.submit(completion("file:///a.py"))
    assert worker.service.started.wait(5)
    queued = worker.submit(CompletionRequest(uri="file:///b.py", text="x = 1\n", cursor=6,
                                             deadline=time.monotonic() + DEADLINE_SLACK_S / 2))
    worker.cancel(queued)
    worker.service.release.set()
    running.future.result(5)
    wait_for(lambda: unanswered(worker)["deadline_exceeded"] == 1)
    assert unanswered(worker)["cancelled"] == 0
