"""The language server finds a daemon that runs other code than its own (started before an upgrade), asks whether to
restart it, and on "yes" a daemon that runs its code takes over. The upgrade is played by a `sitecustomize` module
on the server's PYTHONPATH that gives the server (and the daemon it restarts, which inherits it) another code
stamp than the daemon started before it."""

import asyncio
import os
import re
import subprocess
import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from conftest import MODEL_ARGS
from processes import wait_for_exit
from scratch import scratch_folder

NEW_STAMP = "9.9.9+000000000000"
RUNTIME = scratch_folder("nestling-restart-")
UPGRADE = RUNTIME / "upgrade"
UPGRADE.mkdir()
(UPGRADE / "sitecustomize.py").write_text(
    "import nestling.daemon.code_stamp as stamps\n"
    f"stamps.code_stamp = lambda: {NEW_STAMP!r}\n")
OLD_ENV = dict(os.environ, XDG_RUNTIME_DIR=str(RUNTIME))
NEW_ENV = dict(OLD_ENV, PYTHONPATH=os.pathsep.join(filter(None, [str(UPGRADE), os.environ.get("PYTHONPATH")])))
SERVER = [sys.executable, "-m", "nestling.daemon.cli.main", "lsp", *MODEL_ARGS]
asked: list[types.ShowMessageRequestParams] = []
URI = "file:///work/restart_example.py"


def request():
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=types.Position(line=1, character=4),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked))


def nestling(*args, env):
    return subprocess.run([sys.executable, "-m", "nestling.daemon.cli.main", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=300)


def serving_pid(env) -> int | None:
    status = nestling("status", env=env)
    match = re.search(r"\(pid (\d+)\) serving", status.stdout)
    return int(match.group(1)) if match else None


@pytest.fixture(scope="module")
def old_daemon():
    started = nestling("serve", "--detach", *MODEL_ARGS, env=OLD_ENV)
    assert started.returncode == 0, started.stderr
    yield int(re.search(r"pid (\d+)", started.stdout).group(1))
    nestling("serve", "--stop", "--wait", 60, env=OLD_ENV)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=NEW_ENV), scope="module")
async def client(lsp_client: LanguageClient, old_daemon):
    @lsp_client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    def answer(params: types.ShowMessageRequestParams):
        asked.append(params)
        return types.MessageActionItem(title="Restart the daemon")

    await lsp_client.initialize_session(types.InitializeParams(capabilities=types.ClientCapabilities(),
                                                               initialization_options={"maxTokens": 4}))
    lsp_client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=URI, language_id="python", version=1, text="def main():\n    \n")))
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio(loop_scope="module")
async def test_a_daemon_running_other_code_is_restarted_when_the_user_says_so(client: LanguageClient, old_daemon):
    typed = []  # completions asked for while it restarts: they wait for the new daemon (they had started another)

    async def typing():
        while len(typed) < 200:
            if asked:
                typed.append(asyncio.ensure_future(client.text_document_inline_completion_async(request())))
            await asyncio.sleep(0.05)

    keystrokes = asyncio.ensure_future(typing())
    for _ in range(600):  # the server asks, then `nestling serve --restart` stops the old daemon and loads the model
        pid = serving_pid(NEW_ENV) if asked else None
        if pid is not None and pid != old_daemon:
            break
        await asyncio.sleep(0.2)
    keystrokes.cancel()
    answers = await asyncio.gather(*typed, return_exceptions=True)
    assert typed and not [a for a in answers if isinstance(a, BaseException)], answers
    assert not [m for m in client.messages if m.type == types.MessageType.Error], client.messages
    assert asked and "runs code" in asked[0].message and NEW_STAMP in asked[0].message, asked
    assert [a.title for a in asked[0].actions] == ["Restart the daemon", "Not now"]
    assert pid is not None and pid != old_daemon and wait_for_exit(old_daemon)
    assert ": the code installed now" in nestling("status", env=NEW_ENV).stdout  # the new daemon runs the new stamp
    assert "runs code 9.9.9+000000000000" in nestling("status", env=OLD_ENV).stdout  # seen from the old install
