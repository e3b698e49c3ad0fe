"""The daemon over a real gRPC channel on a Unix socket: completions, streaming, reuse, superseding,
deadlines, cancel, health/reflection, permissions, and bad requests that never take it down."""

import stat
import threading
import time

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nestling.daemon.grpc_api.client import MAX_TOKENS_LIMIT_KEY, full_text_request, max_tokens_limit_of
from nestling.daemon.grpc_api.server import DaemonError, check_tcp_address
from nestling.daemon.service.completion import DeadlineExceeded, Superseded
from nestling.proto import completion_pb2 as pb

SOURCE = "import os\n\n\ndef main(path):\n    names = os.listdir(path)\n    return names\n\n\n"


def request(uri="file:///a.py", text=SOURCE, cursor=None, **options):
    cursor = len(text) if cursor is None else cursor
    options.setdefault("max_tokens", 12)
    return full_text_request(uri, text, cursor, "python", **options)


def code_of(call):
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code(), info.value.details()


def test_health_and_reflection_answer(daemon):
    assert daemon.client.serving()
    stub = reflection_pb2_grpc.ServerReflectionStub(daemon.client.channel)
    answers = list(stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
    names = {s.name for s in answers[0].list_services_response.service}
    assert {"nestling.v1.Completion", "grpc.health.v1.Health"} <= names


def test_socket_is_owner_only(daemon):
    mode = daemon.config.socket_path.stat().st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    assert stat.S_IMODE(daemon.config.socket_path.parent.stat().st_mode) == 0o700


def test_unary_and_streaming_agree(daemon):
    unary = daemon.client.complete(request(uri="file:///u.py", line_mode=pb.LINE_MODE_MULTI))
    chunks = list(daemon.client.stream(request(uri="file:///s.py", line_mode=pb.LINE_MODE_MULTI)))
    assert chunks[-1].done and not any(c.done for c in chunks[:-1])
    assert [i.text for i in chunks[-1].items] == [i.text for i in unary.items]
    streamed = "".join(c.text for c in chunks[:-1])
    assert unary.items and unary.items[0].text and streamed.startswith(unary.items[0].text)
    assert unary.stats.tokens > 0 and unary.stats.region and unary.stats.mode == "spec"


def test_autoregressive_mode_gives_the_same_completion(daemon):
    spec = daemon.client.complete(request(uri="file:///m1.py", line_mode=pb.LINE_MODE_MULTI))
    ar = daemon.client.complete(request(uri="file:///m2.py", line_mode=pb.LINE_MODE_MULTI,
                                        mode=pb.DECODING_MODE_AUTOREGRESSIVE))
    assert [i.text for i in spec.items] == [i.text for i in ar.items]
    assert ar.stats.tau == pytest.approx(1.0) and ar.stats.mode == "ar"
    assert spec.stats.tau > 1  # the same text though the speculative one really accepted drafts


def test_prefix_reuse_gives_the_same_output_as_no_reuse(daemon):
    daemon.client.complete(request(uri="file:///r.py"))
    edited = SOURCE + "x"
    reused = daemon.client.complete(request(uri="file:///r.py", text=edited))
    fresh = daemon.client.complete(request(uri="file:///fresh.py", text=edited))
    assert reused.stats.reused_prefix_tokens > 0 and fresh.stats.reused_prefix_tokens == 0
    assert [i.text for i in reused.items] == [i.text for i in fresh.items]


def test_asking_again_in_the_same_document_follows_the_last_completion(daemon):
    first = daemon.client.complete(request(uri="file:///again.py", line_mode=pb.LINE_MODE_MULTI))
    again = daemon.client.complete(request(uri="file:///again.py", line_mode=pb.LINE_MODE_MULTI))
    other = daemon.client.complete(request(uri="file:///other.py", line_mode=pb.LINE_MODE_MULTI))
    assert [i.text for i in again.items] == [i.text for i in first.items] == [i.text for i in other.items] != []
    assert again.stats.tau > other.stats.tau and again.stats.tau >= 5  # its last completion drafted as one chain


def test_typing_the_first_character_shown_finds_its_prompt_prefilled_ahead(daemon):
    from nestling.daemon.service.completion import predicted_keystroke

    before = daemon.client.stats()
    first = daemon.client.complete(request(uri="file:///ahead.py", line_mode=pb.LINE_MODE_MULTI))
    # a prefill ahead is counted when it ends; an earlier test's, interrupted by this request, may end just after it:
    # wait until the count has grown and then held for a while
    deadline, counted, since = time.monotonic() + 30, before.prefills_ahead, time.monotonic()
    while counted == before.prefills_ahead or time.monotonic() - since < 0.5:
        assert time.monotonic() < deadline, "no prefill ahead after a completion"
        time.sleep(0.02)
        if (now := daemon.client.stats().prefills_ahead) != counted:
            counted, since = now, time.monotonic()
    typed = SOURCE + predicted_keystroke(first.items[0].text)
    ready = daemon.client.complete(request(uri="file:///ahead.py", text=typed, line_mode=pb.LINE_MODE_MULTI))
    fresh = daemon.client.complete(request(uri="file:///ahead-fresh.py", text=typed, line_mode=pb.LINE_MODE_MULTI))
    assert ready.stats.reused_prefix_tokens == ready.stats.prompt_tokens - 1  # only the last token runs again
    assert [i.text for i in ready.items] == [i.text for i in fresh.items]
    after = daemon.client.stats()
    assert after.prefills_ahead_used == before.prefills_ahead_used + 1 and after.prefills == before.prefills


@pytest.fixture
def outcomes(daemon, monkeypatch):
    """How the daemon's completions ended, by URI: the result, or the exception the service raised."""
    ended = {}
    service = daemon.daemon.service
    complete = service.complete

    def recording(request, *args, **kwargs):
        try:
            ended[request.uri] = complete(request, *args, **kwargs)
        except Exception as exc:
            ended[request.uri] = exc
            raise
        return ended[request.uri]

    monkeypatch.setattr(service, "complete", recording)
    return ended


def test_deadline_stops_generation_and_the_daemon_keeps_serving(daemon, outcomes):
    before = daemon.client.stats()
    code, _ = code_of(lambda: daemon.client.complete(
        request(uri="file:///slow.py", max_tokens=1000, line_mode=pb.LINE_MODE_MULTI), timeout=0.5))
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert daemon.client.complete(request(uri="file:///after.py")).stats.tokens > 0
    # the slow request stopped early (the worker runs one job at a time: it has ended by now), at the deadline or
    # at the cancel the deadline gives the call, whichever the engine saw first, instead of running to its end
    assert isinstance(outcomes["file:///slow.py"], (DeadlineExceeded, Superseded))
    after = daemon.client.stats()  # counted as past its deadline either way, and not as a failure
    assert after.deadline_exceeded == before.deadline_exceeded + 1
    assert (after.errors, after.cancelled, after.superseded) == (before.errors, before.cancelled, before.superseded)


@pytest.mark.parametrize("second_client", ["editor A", "editor B"])
def test_a_newer_request_supersedes_the_running_one_from_the_same_client(daemon, second_client):
    outcome = {}

    def first():
        try:
            daemon.client.complete(request(uri="file:///same.py", client="editor A", max_tokens=1000,
                                           line_mode=pb.LINE_MODE_MULTI, stop=["never written"]))
            outcome["first"] = "ok"
        except grpc.RpcError as exc:
            outcome["first"] = exc.code()

    before = daemon.client.stats().superseded
    thread = threading.Thread(target=first)
    thread.start()
    time.sleep(0.5)
    second = daemon.client.complete(request(uri="file:///same.py", text=SOURCE + "y", client=second_client))
    thread.join(30)
    assert second.stats.tokens > 0
    if second_client == "editor A":
        assert outcome["first"] == grpc.StatusCode.CANCELLED
        assert daemon.client.stats().superseded == before + 1
    else:  # another editor with the same file open: each is answered
        assert outcome["first"] == "ok"
        assert daemon.client.stats().superseded == before


def test_client_cancel_stops_the_stream(daemon, outcomes):
    before = daemon.client.stats()
    call = daemon.client.stream(request(uri="file:///cancel.py", max_tokens=1000, line_mode=pb.LINE_MODE_MULTI))
    first = next(call)
    assert first.text or first.done
    call.cancel()
    assert daemon.client.complete(request(uri="file:///next.py")).stats.tokens > 0
    assert isinstance(outcomes["file:///cancel.py"], Superseded)  # stopped by the cancel, not run to its end
    after = daemon.client.stats()
    assert after.cancelled == before.cancelled + 1
    assert (after.errors, after.superseded, after.deadline_exceeded) == (
        before.errors, before.superseded, before.deadline_exceeded)


@pytest.mark.parametrize("make,code,field", [
    (lambda: request(uri=""), grpc.StatusCode.INVALID_ARGUMENT, "document.uri"),
    (lambda: request(cursor=10_000), grpc.StatusCode.INVALID_ARGUMENT, "cursor_offset"),
    (lambda: pb.CompleteRequest(document=pb.Document(uri="x")), grpc.StatusCode.INVALID_ARGUMENT, "document.content"),
    (lambda: request(temperature=-1.0), grpc.StatusCode.INVALID_ARGUMENT, "options.temperature"),
    (lambda: request(max_tokens=100_000), grpc.StatusCode.INVALID_ARGUMENT, "options.max_tokens"),
    (lambda: request(text="x" * 300_000), grpc.StatusCode.RESOURCE_EXHAUSTED, "limit"),
    (lambda: request(stop=[""]), grpc.StatusCode.INVALID_ARGUMENT, "options.stop"),
])
def test_bad_requests_get_the_right_code_naming_the_field(daemon, make, code, field):
    got, details = code_of(lambda: daemon.client.complete(make()))
    assert got == code and field in details
    assert daemon.client.serving()


def test_a_refusal_of_too_many_tokens_carries_the_limit_as_metadata(daemon):
    """A client learns the daemon's max_tokens_limit from the refusal's trailing metadata, not from its words."""
    limit = daemon.config.max_tokens_limit
    for call in (daemon.client.complete, lambda r: list(daemon.client.stream(r))):
        with pytest.raises(grpc.RpcError) as info:
            call(request(max_tokens=limit + 1))
        assert max_tokens_limit_of(info.value) == limit
        assert dict(info.value.trailing_metadata())[MAX_TOKENS_LIMIT_KEY] == str(limit)
    with pytest.raises(grpc.RpcError) as info:  # other refusals carry no limit
        daemon.client.complete(request(temperature=-1.0))
    assert max_tokens_limit_of(info.value) is None


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(uri=st.text(max_size=20), language=st.text(max_size=12), text=st.text(max_size=200),
       cursor=st.integers(0, 400), max_tokens=st.integers(0, 2000), line_mode=st.integers(-1, 5),
       temperature=st.one_of(st.floats(-2, 20), st.just(float("nan"))),
       top_p=st.one_of(st.floats(-1, 2), st.just(float("nan"))),
       alternatives=st.integers(0, 12), mode=st.integers(-1, 3), stop=st.lists(st.text(max_size=4), max_size=3))
def test_fuzzed_requests_never_crash_the_daemon(daemon, uri, language, text, cursor, max_tokens, line_mode,
                                                temperature, top_p, alternatives, mode, stop):
    message = pb.CompleteRequest(
        document=pb.Document(uri=uri, language_id=language, full=pb.FullText(text=text, cursor_offset=cursor)),
        options=pb.Options(max_tokens=min(max_tokens, 8) if max_tokens else 0, line_mode=line_mode,
                           temperature=temperature, top_p=top_p, alternatives=alternatives, mode=mode, stop=stop))
    try:
        daemon.client.complete(message, timeout=60)
    except grpc.RpcError as exc:
        assert exc.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED), exc.details()
    assert daemon.client.serving()


def test_stats_report_the_model_and_latencies(daemon):
    before = daemon.client.stats().requests
    daemon.client.complete(request(uri="file:///counted.py"))
    stats = daemon.client.stats()
    assert stats.requests == before + 1 and stats.head == "test" and stats.device == "cpu"
    assert stats.dtype == "float32" and stats.exact_rows == 0 and not stats.packed_weights  # the tiny test model
    assert stats.time_to_first_token.p50_ms > 0 and stats.cache_documents > 0
    profile = stats.cost_profile  # timed (or read) at the start: the daemon's own, in numbers
    assert stats.HasField("cost_profile") and 0 < profile.verify_one_ms <= profile.verify_16_ms
    assert profile.draft_step_ms >= 0 and profile.measured_at


def test_non_loopback_tcp_is_refused_without_remote_and_token():
    assert check_tcp_address("127.0.0.1:7878", False, None) == ("127.0.0.1", 7878)
    assert check_tcp_address("[::1]:7878", False, None)[1] == 7878
    with pytest.raises(DaemonError, match="not a loopback"):
        check_tcp_address("0.0.0.0:7878", False, None)
    with pytest.raises(DaemonError, match="not a loopback"):
        check_tcp_address("192.168.1.5:7878", True, None)
    assert check_tcp_address("192.168.1.5:7878", True, "secret")[0] == "192.168.1.5"


def test_typing_replay_reuses_the_prefix(daemon):
    from nestling.daemon.bench.typing import default_document, replay, summarize

    text = default_document(300)
    on = summarize(replay(daemon.client, text, 200, 3, 4, cache=True))
    off = summarize(replay(daemon.client, text, 200, 3, 4, cache=False))
    assert on["reused_tokens"] > 0.5 * on["prompt_tokens"] and off["reused_tokens"] == 0
    for run in (on, off):  # what the completions were: mean tokens, and tokens per target forward
        assert 0 < run["completion_tokens"] <= 4 and run["tau"] >= 1.0


def test_a_prefill_prepares_the_prompt_the_first_completion_reuses(daemon):
    from nestling.daemon.bench.typing import default_document
    from nestling.daemon.grpc_api.client import prefill_request

    text = default_document(50)  # shorter than the prompt budget: every prompt starts at the file's start
    before = daemon.client.stats().prefills
    ready = daemon.client.prefill(prefill_request("file:///opened.py", text, len(text), "python"))
    assert ready.complete and ready.prefilled_tokens == ready.prompt_tokens > 500 and ready.reused_tokens == 0
    cursor = text.rindex("\n", 0, len(text) - 200) + 1  # a line start a few lines before the end
    first = daemon.client.complete(request(uri="file:///opened.py", text=text, cursor=cursor))
    fresh = daemon.client.complete(request(uri="file:///not-opened.py", text=text, cursor=cursor))
    suffix_tokens = first.stats.prompt_tokens - first.stats.reused_prefix_tokens
    assert first.stats.prompt_tokens == fresh.stats.prompt_tokens and fresh.stats.reused_prefix_tokens == 0
    # only what follows the cursor (and the token before it and the FIM markers) is computed
    assert 0 < suffix_tokens <= daemon.config.suffix_tokens + 4
    assert [i.text for i in first.items] == [i.text for i in fresh.items]
    stats = daemon.client.stats()
    assert stats.prefills == before + 1 and stats.prefilled_tokens >= ready.prefilled_tokens


@pytest.mark.parametrize("make,code,field", [
    (lambda: pb.PrefillRequest(document=pb.Document(uri="", full=pb.FullText(text="x")))
     , grpc.StatusCode.INVALID_ARGUMENT, "document.uri"),
    (lambda: pb.PrefillRequest(document=pb.Document(uri="x", full=pb.FullText(text="x", cursor_offset=5))),
     grpc.StatusCode.INVALID_ARGUMENT, "cursor_offset"),
    (lambda: pb.PrefillRequest(document=pb.Document(uri="x")), grpc.StatusCode.INVALID_ARGUMENT, "document.content"),
    (lambda: pb.PrefillRequest(document=pb.Document(uri="x", parts=pb.PrefixSuffix(prefix="x" * 300_000))),
     grpc.StatusCode.RESOURCE_EXHAUSTED, "limit"),
])
def test_bad_prefills_get_the_right_code_naming_the_field(daemon, make, code, field):
    got, details = code_of(lambda: daemon.client.prefill(make()))
    assert got == code and field in details
    assert daemon.client.serving()


def test_opening_replay_reuses_the_prefill(daemon):
    from nestling.daemon.bench.typing import DATA, replay_openings

    files = [DATA / "inventory.py", DATA / "lru_cache.go"]
    results, prefill_ms = replay_openings(daemon.client, files, 4)
    prefilled = [r for r in results if r.cache]
    cold = [r for r in results if not r.cache]
    assert len(prefilled) == len(cold) == 2 and len(prefill_ms) == 2 and all(ms > 0 for ms in prefill_ms)
    suffix_budget = daemon.config.suffix_tokens
    assert all(0 < r.prompt_tokens - r.reused_tokens <= suffix_budget + 4 for r in prefilled), prefilled
    assert all(r.reused_tokens == 0 for r in cold)


def test_a_completion_right_after_the_prefill_interrupts_it(daemon):
    from nestling.daemon.bench.typing import DATA, replay_openings

    files = [DATA / "inventory.py", DATA / "lru_cache.go"]

    def prefilled_tokens(delay_s):
        before = daemon.client.stats().prefilled_tokens
        results, prefill_ms = replay_openings(daemon.client, files, 4, delay_s=delay_s)
        assert len(results) == 4 and len(prefill_ms) == 2
        return daemon.client.stats().prefilled_tokens - before

    whole = prefilled_tokens(None)  # each completion waits for its prefill
    assert prefilled_tokens(0.0) < whole / 2  # sent at once: the prefills stop within a chunk or never start


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(uri=st.text(max_size=20), language=st.text(max_size=12), text=st.text(max_size=300), cursor=st.integers(0, 400),
       parts=st.booleans())
def test_fuzzed_prefills_never_crash_the_daemon(daemon, uri, language, text, cursor, parts):
    content = ({"parts": pb.PrefixSuffix(prefix=text[:cursor], suffix=text[cursor:])} if parts
               else {"full": pb.FullText(text=text, cursor_offset=cursor)})
    try:
        reply = daemon.client.prefill(pb.PrefillRequest(document=pb.Document(uri=uri, language_id=language, **content)),
                                      timeout=60)
        assert reply.complete and reply.prefilled_tokens + reply.reused_tokens == reply.prompt_tokens
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.details()
    assert daemon.client.serving()


@pytest.mark.parametrize("raw", [b"\x0a\x04\x0a\x02\xff\xfe",  # document.uri holding bytes that are not UTF-8
                                 b"\x0a\x09\x0a\x07file:",  # a length past the message's end
                                 b"\xff\xff\xff\xff"])  # not a message at all
def test_undecodable_requests_are_invalid_arguments_and_the_daemon_keeps_serving(daemon, raw):
    for method in ("Complete", "Prefill"):
        call = daemon.client.channel.unary_unary(f"/nestling.v1.Completion/{method}")
        code, details = code_of(lambda: call(raw, timeout=10))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "could not be decoded" in details
    stream = daemon.client.channel.unary_stream("/nestling.v1.Completion/CompleteStream")
    code, details = code_of(lambda: list(stream(raw, timeout=10)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "could not be decoded" in details
    assert daemon.client.complete(request(uri="file:///after_bytes.py")).stats.tokens > 0
