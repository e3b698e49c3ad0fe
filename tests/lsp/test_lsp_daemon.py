"""The language server against a real daemon process: started on demand (with $/progress), used over its
Unix socket, and found again after it restarts."""

import asyncio
import os
import re
import signal
import sys
import time

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from conftest import MODEL
from nestling.daemon.grpc_api.client import Client, target_for
from processes import wait_for_exit
from scratch import scratch_folder

RUNTIME = scratch_folder("nestling-xdg-")
ENV = dict(os.environ, XDG_RUNTIME_DIR=str(RUNTIME))
SERVER = [sys.executable, "-m", "nestling.daemon.cli.main", "lsp", "--model", str(MODEL), "--head", "untrained",
          "--dtype", "float32"]
URI = "file:///work/daemon_example.py"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=ENV), scope="module")
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=True)),
        initialization_options={"maxTokens": 6}))
    lsp_client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=URI, language_id="python", version=1, text="def main():\n    \n")))
    yield
    await lsp_client.shutdown_session()
    stop_daemon()


def daemon_pid() -> int | None:
    lock = RUNTIME / "nestling" / "daemon.lock"
    match = re.search(r"pid (\d+)", lock.read_text()) if lock.exists() else None
    return int(match.group(1)) if match else None


def stop_daemon() -> None:
    pid = daemon_pid()
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    wait_for_exit(pid)


def request():
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=types.Position(line=1, character=4),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked))


@pytest.mark.asyncio(loop_scope="module")
async def test_the_daemon_is_started_on_demand_with_progress(client: LanguageClient):
    result = await client.text_document_inline_completion_async(request())
    assert result.items and daemon_pid() is not None  # the tiny model never stops: always a completion
    socket = RUNTIME / "nestling" / "daemon.sock"
    assert socket.exists() and (socket.stat().st_mode & 0o777) == 0o600
    progress = [str(v) for values in client.progress_reports.values() for v in values]
    assert any("daemon" in p or "model" in p for p in progress), progress
    # the daemon it started runs the code installed now: no notice to restart it (tests/lsp/test_backend.py: one that
    # does not gets one)
    assert not [m for m in client.messages if "restart" in m.message], client.messages


@pytest.mark.asyncio(loop_scope="module")
async def test_opening_a_document_prefills_it_in_the_daemon(client: LanguageClient):
    await client.text_document_inline_completion_async(request())  # the daemon is up
    with Client(target_for(RUNTIME / "nestling" / "daemon.sock")) as daemon:
        before = daemon.stats().prefilled_tokens  # the session's first, tiny, document may add a few tokens later
        client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
            uri="file:///work/opened_later.py", language_id="python", version=1, text="import os\n\n" * 40)))
        deadline = time.monotonic() + 60
        while daemon.stats().prefilled_tokens < before + 100:  # its prompt: 40 lines, over 100 tokens
            assert time.monotonic() < deadline, "the opened document was not prefilled"
            await asyncio.sleep(0.1)


@pytest.mark.asyncio(loop_scope="module")
async def test_completion_after_the_daemon_restarts(client: LanguageClient):
    first = daemon_pid()
    stop_daemon()
    result = await client.text_document_inline_completion_async(request())  # starts it again, reconnects
    assert result.items and daemon_pid() not in (None, first)  # a completion from the new daemon
