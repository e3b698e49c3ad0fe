"""The embedded language server where the config file cannot be read: each request says why, and the start-up's
progress ends (an editor's spinner would stay up)."""

import asyncio
import os

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from conftest import EMBEDDED
from scratch import scratch_folder

MISSING = scratch_folder("nestling-config-") / "missing.toml"
URI = "file:///work/example.py"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=EMBEDDED,
                                              server_env=dict(os.environ, NESTLING_CONFIG=str(MISSING))))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(types.InitializeParams(capabilities=types.ClientCapabilities(
        window=types.WindowClientCapabilities(work_done_progress=True))))
    lsp_client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=URI, language_id="python", version=1, text="def f():\n    \n")))
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_an_unreadable_config_file_is_said_and_the_progress_ends(client: LanguageClient):
    for _ in range(200):
        if client.messages and client.progress_reports:
            break
        await asyncio.sleep(0.05)
    said = [m.message for m in client.messages if m.type == types.MessageType.Error]
    assert said and all(f"nestling could not start: {MISSING}: no such file" in m for m in said), client.messages
    for _ in range(100):  # (the end follows the client's answer to the progress token's creation)
        if all(isinstance(reports[-1], types.WorkDoneProgressEnd) for reports in client.progress_reports.values()):
            break
        await asyncio.sleep(0.05)
    assert client.progress_reports and all(
        isinstance(reports[-1], types.WorkDoneProgressEnd) for reports in client.progress_reports.values()), \
        client.progress_reports
