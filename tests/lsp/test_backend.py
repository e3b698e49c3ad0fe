"""The backends: the embedded engine (completions, the prefill on opening, load errors) and the daemon backend (which
daemon it finds, a daemon still loading, one running other code)."""

import asyncio
import threading

import grpc
import pytest

from conftest import MODEL
from daemons import start_daemon, stop_daemon
from nestling.daemon.grpc_api.client import MAX_TOKENS_LIMIT_KEY
from nestling.daemon.models.target import load_target
from nestling.daemon.runtime import Runtime
from nestling.daemon.speculative.drafter import TreeBudget
from nestling.lsp.backend import BackendError, DaemonBackend, EmbeddedBackend, Opened, Query, max_tokens_limit
from tiny import informed_head

TEXT = "import os\n\n\ndef main(path):\n    names = os.listdir(path)\n    return names\n" * 8


def tiny_runtime():
    target = load_target(str(MODEL), device="cpu", dtype="float32", progress=False)
    return Runtime(target=target, head=informed_head(target), head_source="test", budget=TreeBudget(4, 4, 12))


async def errors_of_ensure_ready(backend, times: int) -> list[str]:
    """What `times` calls of backend.ensure_ready() raised, as text (none when ready)."""
    errors = []
    for _ in range(times):
        try:
            await backend.ensure_ready()
        except BackendError as exc:
            errors.append(str(exc))
    return errors


def test_a_prefilled_document_is_completed_from_its_prepared_prompt():
    async def scenario():
        backend = EmbeddedBackend(tiny_runtime)
        await backend.prefill(Opened("file:///early.py", "python", TEXT, len(TEXT)))  # not loaded yet: skipped
        await backend.ensure_ready()
        await backend.prefill(Opened("file:///a.py", "python", TEXT, len(TEXT)))
        session = backend.service.sessions.get("file:///a.py")
        prepared = len(session.states["spec"].tokens)
        cursor = TEXT.index("return names", len(TEXT) // 2)
        texts = await backend.complete(Query("file:///a.py", "python", TEXT, cursor, 8, "single", 1))
        result = backend.worker.stats.snapshot()
        await backend.close()
        return prepared, texts, result

    prepared, texts, stats = asyncio.run(scenario())
    assert prepared > 100 and stats["prefills"] == 1 and stats["prefilled_tokens"] == prepared
    assert stats["requests"] == 1 and texts


def test_a_model_that_fails_to_load_is_a_backend_error_each_time_and_the_progress_ends(tmp_path):
    def missing_model():
        return load_target(str(tmp_path / "no-model"), device="cpu", progress=False)

    async def scenario():
        backend, reports = EmbeddedBackend(missing_model), []
        errors = []
        for _ in range(2):  # the warm-up, then a completion request
            try:
                await backend.complete(Query("file:///a.py", "python", TEXT, 10, 8, "single", 1),
                                       lambda kind, message: reports.append((kind, message)))
            except BackendError as exc:
                errors.append(str(exc))
        return reports, errors

    reports, errors = asyncio.run(scenario())
    assert len(errors) == 2 and all(e.startswith("the model could not be loaded: ") and "no-model" in e for e in errors)
    assert reports == [("begin", "loading the model"), ("end", "the model failed to load")]


def test_the_daemon_backend_finds_the_daemon_the_config_file_names(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text(f'socket = "{tmp_path / "my.sock"}"\ntoken = "s3cret"\n')
    monkeypatch.setenv("NESTLING_CONFIG", str(config))

    async def scenario():
        found = DaemonBackend(None, None, None, auto_start=False)
        chosen = DaemonBackend(str(tmp_path / "editor.sock"), None, "t", auto_start=False)  # the editor's settings
        for backend in (found, chosen):
            await backend.close()
        return [(b.target, b.token, b.client.metadata) for b in (found, chosen)]

    assert asyncio.run(scenario()) == [  # the token found is the one the calls carry
        (f"unix:{tmp_path / 'my.sock'}", "s3cret", (("authorization", "Bearer s3cret"),)),
        (f"unix:{tmp_path / 'editor.sock'}", "t", (("authorization", "Bearer t"),))]


def test_requests_while_the_daemon_restarts_wait_for_it_and_start_no_other(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    monkeypatch.setenv("NESTLING_TOKEN", "from-env")

    async def scenario():
        backend = DaemonBackend(str(tmp_path / "none.sock"), None, None, auto_start=True)  # nothing answers there
        spawned = []

        async def serve(flag, progress, wait_s, begin, verb):  # `nestling serve FLAG`, standing in
            spawned.append(flag)
            await asyncio.sleep(3.0)  # (longer than the health check, 1 s at most)

        backend._serve = serve
        restarting = asyncio.ensure_future(backend.restart())
        await asyncio.sleep(0.1)  # the old daemon is gone: a request sees no daemon
        await backend.ensure_ready()
        await restarting
        await backend.close()
        return spawned, backend.client.metadata

    assert asyncio.run(scenario()) == (["--restart"], (("authorization", "Bearer from-env"),))


def test_a_broken_config_file_is_the_error_each_request_gets_and_no_daemon_is_started(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text("max_tokens = 'many'\n")
    monkeypatch.setenv("NESTLING_CONFIG", str(config))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))

    async def scenario():
        backend = DaemonBackend(None, None, None, auto_start=True)
        backend._start = None  # starting a daemon would fail the test
        errors = await errors_of_ensure_ready(backend, 2)
        await backend.close()
        return errors

    assert asyncio.run(scenario()) == [f"{config}: setting max_tokens must be a non-negative integer, not 'many'"] * 2


def test_the_embedded_engine_runs_with_the_config_files_settings_under_the_flags(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from nestling.daemon.cli.lsp import _embedded_engine

    config = tmp_path / "config.toml"
    config.write_text('mode = "ar"\nhead = "none"\nsuffix_tokens = 16\n')
    monkeypatch.setenv("NESTLING_CONFIG", str(config))
    flags = SimpleNamespace(model=None, head="untrained", device=None, dtype="float32")
    _, service_config = _embedded_engine(flags)
    assert (service_config.mode, service_config.head, service_config.suffix_tokens, service_config.dtype) == \
        ("ar", "untrained", 16, "float32")
    config.write_text("mode = 3\n")
    load, _ = _embedded_engine(flags)
    with pytest.raises(BackendError, match="nestling could not start: .*setting mode must be one of"):
        load()
    config.unlink()  # the file $NESTLING_CONFIG names is gone: said, not the defaults in silence
    load, _ = _embedded_engine(flags)
    with pytest.raises(BackendError, match=r"config.toml: no such file \(\$NESTLING_CONFIG names it"):
        load()


def test_the_daemon_backend_says_when_the_daemon_runs_other_code(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    running = start_daemon(tmp_path, MODEL)

    async def notices():
        backend = DaemonBackend(str(running.config.socket_path), None, None, auto_start=False)
        try:
            await backend.ensure_ready()
            same = await backend.stale_notice()
            running.daemon.code_stamp = "0.0.1+000000000000"  # as a daemon started before an upgrade
            return same, await backend.stale_notice()
        finally:
            await backend.close()

    try:
        same, other = asyncio.run(notices())
    finally:
        stop_daemon(running)
    assert same is None
    assert "runs code 0.0.1+000000000000" in other and "restart it" in other
    assert asyncio.run(EmbeddedBackend(tiny_runtime).stale_notice()) is None  # the engine runs this process's code


def test_a_daemon_still_loading_its_model_is_waited_for_not_started_again(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    gate = threading.Event()
    running = start_daemon(tmp_path, MODEL, load_gate=gate)  # answers, NOT_SERVING until the gate opens
    reports = []

    async def scenario():
        backend = DaemonBackend(str(running.config.socket_path), None, None, auto_start=True)
        try:
            asyncio.get_running_loop().call_later(1.0, gate.set)
            await backend.ensure_ready(lambda phase, message: reports.append((phase, message)))
            return await backend.complete(Query("file:///a.py", "python", TEXT, len(TEXT), 4, "multi", 1))
        finally:
            await backend.close()

    try:
        texts = asyncio.run(scenario())
    finally:
        gate.set()
        stop_daemon(running)
    assert texts and texts[0]
    assert reports[0] == ("begin", "the nestling daemon is loading the model") and reports[-1][0] == "end"
    assert not any("starting" in str(message) for _, message in reports)  # no second daemon was started


def test_a_daemon_listening_on_another_socket_is_named_where_it_listens(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    from nestling.daemon.service.config import runtime_dir

    runtime_dir().mkdir(parents=True, exist_ok=True)
    (runtime_dir() / "daemon.lock").write_text(f"pid 4242, socket {tmp_path / 'other.sock'}")  # `serve --socket`

    async def scenario():
        backend = DaemonBackend(str(tmp_path / "mine.sock"), None, None, auto_start=True)
        await backend.close()
        return backend._not_answering()

    said = asyncio.run(scenario())
    assert f"listens on {tmp_path / 'other.sock'}, not on unix:{tmp_path / 'mine.sock'}" in said


@pytest.mark.parametrize("retry_s,starts", [(30.0, 1), (0.0, 3)])
def test_a_failed_start_is_the_answer_for_a_while_not_tried_again_at_each_request(tmp_path, monkeypatch, retry_s,
                                                                                 starts):
    from nestling.lsp import backend as backends

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    monkeypatch.setattr(backends, "START_RETRY_S", retry_s)

    async def scenario():
        backend = DaemonBackend(str(tmp_path / "none.sock"), None, None, auto_start=True)
        spawned = []

        async def serve(flag, progress, wait_s, begin, verb):  # `nestling serve --detach` failing, standing in
            spawned.append(flag)
            raise BackendError("could not start the nestling daemon: bad model")

        backend._serve = serve
        errors = await errors_of_ensure_ready(backend, 3)
        await backend.close()
        return spawned, errors

    spawned, errors = asyncio.run(scenario())
    assert len(spawned) == starts and errors == ["could not start the nestling daemon: bad model"] * 3


def test_a_restart_the_user_asks_for_is_tried_even_right_after_a_failed_start(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))

    async def scenario():
        backend = DaemonBackend(str(tmp_path / "none.sock"), None, None, auto_start=True)
        spawned = []

        async def serve(flag, progress, wait_s, begin, verb):
            spawned.append(flag)
            if flag == "--detach":
                raise BackendError("could not start the nestling daemon: bad model")
            await asyncio.sleep(3.0)  # the restart: requests meanwhile wait for it, not for the failure before it

        backend._serve = serve
        with pytest.raises(BackendError):
            await backend.ensure_ready()
        restarting = asyncio.ensure_future(backend.restart())
        await asyncio.sleep(0.1)
        await backend.ensure_ready()  # (no BackendError: the start under way is the restart)
        await restarting
        await backend.close()
        return spawned

    assert asyncio.run(scenario()) == ["--detach", "--restart"]


def test_the_daemon_backend_names_this_language_server_in_every_request(tmp_path, monkeypatch):
    """The daemon supersedes a request only by a newer one from the same client: another editor's for the same file
    must not cancel this one's."""
    import nestling.lsp.backend as backend_module
    from nestling.proto import completion_pb2 as pb

    sent = []

    async def complete(request, timeout=None):
        sent.append(request.document.client)
        return pb.CompleteResponse()

    async def prefill(request, timeout=None):
        sent.append(request.document.client)
        return pb.PrefillResponse()

    async def scenario():
        backend = DaemonBackend(str(tmp_path / "d.sock"), None, None, auto_start=False)
        monkeypatch.setattr(backend.client, "complete", complete)
        monkeypatch.setattr(backend.client, "prefill", prefill)
        await backend.complete(Query(uri="untitled:Untitled-1", language_id="python", text="x", cursor=1,
                                     max_tokens=4, line_mode="auto", alternatives=1))
        await backend.prefill(Opened(uri="untitled:Untitled-1", language_id="python", text="x", cursor=1))
        await backend.close()

    asyncio.run(scenario())
    assert sent == [backend_module.CLIENT] * 2 and backend_module.CLIENT.startswith("nestling-lsp-")


def test_the_limit_is_read_from_the_refusals_metadata_or_an_older_daemons_words():
    def refusal(code, details, trailing=()):
        return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailing), details)

    invalid = grpc.StatusCode.INVALID_ARGUMENT
    assert max_tokens_limit(refusal(invalid, "options.max_tokens: must be 0..9", [(MAX_TOKENS_LIMIT_KEY, "7")])) == 7
    assert max_tokens_limit(refusal(invalid, "options.max_tokens: must be 0..9")) == 9  # (no metadata: its words)
    assert max_tokens_limit(refusal(invalid, "options.temperature: must be in [0, 10]")) is None
    assert max_tokens_limit(refusal(invalid, "options.max_tokens: must be 0..0")) is None
    assert max_tokens_limit(refusal(grpc.StatusCode.INTERNAL, "x", [(MAX_TOKENS_LIMIT_KEY, "7")])) is None


def test_an_editors_max_tokens_above_the_daemons_limit_asks_for_the_limit(tmp_path, monkeypatch):
    """(QA: a daemon with max_tokens_limit 32 refused every editor completion, which asks for maxTokens 64.)"""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    running = start_daemon(tmp_path, MODEL, max_tokens=4, max_tokens_limit=6)
    cursor = TEXT.index("return names", len(TEXT) // 2)

    async def completions():
        backend = DaemonBackend(str(running.config.socket_path), None, None, auto_start=False)
        asked = []  # max_tokens of each request sent
        send = backend.client.complete

        async def complete(request, **kwargs):
            asked.append(request.options.max_tokens)
            return await send(request, **kwargs)

        backend.client.complete = complete
        try:
            await backend.ensure_ready()
            first = await backend.complete(Query("file:///a.py", "python", TEXT, cursor, 64, "single", 1))
            second = await backend.complete(Query("file:///a.py", "python", TEXT, cursor, 5, "single", 1))
            return first, backend.max_tokens_limit, second, asked
        finally:
            await backend.close()

    try:
        first, limit, second, asked = asyncio.run(completions())
    finally:
        stop_daemon(running)
    assert limit == 6 and first and second and asked == [64, 6, 5]  # (within the limit: asked once, as the editor says)

    async def embedded():
        from nestling.daemon.service.config import ServiceConfig

        backend = EmbeddedBackend(tiny_runtime, ServiceConfig(max_tokens=4, max_tokens_limit=6))
        try:
            return await backend.complete(Query("file:///a.py", "python", TEXT, cursor, 64, "single", 1))
        finally:
            await backend.close()

    assert asyncio.run(embedded())  # (refused as "options.max_tokens: must be 0..6" before)
