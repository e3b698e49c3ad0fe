"""The language server against a daemon that wants a token (`nestling serve --token`): a missing or wrong one is shown
to the user once (health checks answer without it, so the daemon seems fine while every completion fails), naming the
setting that supplies it."""

import asyncio
import os
import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from conftest import MODEL, MODEL_ARGS
from daemons import start_daemon, stop_daemon
from scratch import scratch_folder

TOKEN = "s3cret-token"
RUNTIME = scratch_folder("nestling-token-")
ENV = dict(os.environ, XDG_RUNTIME_DIR=str(RUNTIME / "xdg"))
SERVER = [sys.executable, "-m", "nestling.daemon.cli.main", "lsp", *MODEL_ARGS]
URI = "file:///work/token_example.py"


@pytest.fixture(scope="module")
def daemon():
    running = start_daemon(RUNTIME, MODEL, token=TOKEN)
    yield running
    stop_daemon(running)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=ENV), scope="module")
async def client(lsp_client: LanguageClient, daemon):
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(),
        initialization_options={"maxTokens": 4, "prefillOnOpen": False,
                                "daemon": {"socket": str(daemon.config.socket_path), "autoStart": False}}))
    lsp_client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=URI, language_id="python", version=1, text="def main():\n    \n")))
    yield
    await lsp_client.shutdown_session()


def request():
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=types.Position(line=1, character=4),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked))


def told(client: LanguageClient) -> list[types.ShowMessageParams]:
    return [m for m in client.messages if "token" in m.message]


async def settings(client: LanguageClient, daemon, token):
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"nestling": {"daemon": {
        "socket": str(daemon.config.socket_path), "autoStart": False, "token": token}}}))
    await asyncio.sleep(0.5)  # the notification's handler has run


@pytest.mark.asyncio(loop_scope="module")
async def test_a_missing_or_wrong_token_is_shown_once_with_the_setting_that_supplies_it(client: LanguageClient,
                                                                                          daemon):
    for _ in range(300):  # the warm-up finds that the daemon answers health checks but refuses the rest
        if told(client):
            break
        await asyncio.sleep(0.1)
    for _ in range(3):
        assert list((await client.text_document_inline_completion_async(request())).items) == []
    [missing] = told(client)  # once, not per request
    assert missing.type == types.MessageType.Error
    assert "wants a token" in missing.message and "none is set" in missing.message
    assert "nestling.daemon.token" in missing.message
    assert any("wants a token" in m.message for m in client.log_messages)  # each request's failure, in the log

    await settings(client, daemon, "wrong")  # a new connection, with a token the daemon refuses: told again, once
    for _ in range(2):
        assert list((await client.text_document_inline_completion_async(request())).items) == []
    assert len(told(client)) == 2 and "refused the one set" in told(client)[1].message

    await settings(client, daemon, TOKEN)
    assert (await client.text_document_inline_completion_async(request())).items  # the tiny model never stops
    assert len(told(client)) == 2


def test_a_token_problem_is_shown_once_per_backend_whichever_path_reports_it_first():
    """The warm-up and a completion sent right after initialize both meet the missing token: one pop-up, then logs."""
    from nestling.lsp.backend import TokenError
    from nestling.lsp.server import NestlingLanguageServer

    server = NestlingLanguageServer(make_backend=None)
    shown, logged = [], []
    server.window_show_message = shown.append
    server.window_log_message = logged.append
    server.backend = object()
    server.tell(TokenError("the daemon wants a token"), log_only=True)  # a completion's, first
    server.tell(TokenError("the daemon wants a token"))  # the warm-up's
    assert len(shown) == 1 and len(logged) == 1
    server.backend = object()  # new connection settings: told again
    server.tell(TokenError("the daemon refused the token set"))
    assert len(shown) == 2
