"""The language server end to end (pytest-lsp drives it over stdio), with the engine embedded."""

import asyncio

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from conftest import EMBEDDED

URI = "file:///work/example.py"
SOURCE = "import os\n\n\ndef list_names(path):\n    names = os.listdir(path)\n    \n    return names\n"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=EMBEDDED), scope="module")
async def client(lsp_client: LanguageClient):
    result = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(
            general=types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf16]),
            window=types.WindowClientCapabilities(work_done_progress=True)),
        initialization_options={"nestling": {"maxTokens": 8, "alternatives": 2, "disabledLanguages": ["markdown"]}}))
    assert result.capabilities.inline_completion_provider is not None
    assert result.capabilities.completion_provider is not None
    lsp_client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=URI, language_id="python", version=1, text=SOURCE)))
    yield
    await lsp_client.shutdown_session()


def inline_params(line, character, kind=types.InlineCompletionTriggerKind.Automatic, selected=None, uri=URI):
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=character),
        context=types.InlineCompletionContext(trigger_kind=kind, selected_completion_info=selected))


@pytest.mark.asyncio(loop_scope="module")
async def test_automatic_inline_completion_gives_one_item_on_one_line(client: LanguageClient):
    result = await client.text_document_inline_completion_async(inline_params(5, 4))
    assert len(result.items) == 1  # the tiny test model never stops, so there is always a completion
    for item in result.items:
        assert item.insert_text.strip() and "\n" not in item.insert_text
        assert item.range.start == item.range.end == types.Position(line=5, character=4)  # insert at the cursor


@pytest.mark.asyncio(loop_scope="module")
async def test_invoked_inline_completion_offers_alternatives(client: LanguageClient):
    result = await client.text_document_inline_completion_async(
        inline_params(5, 4, types.InlineCompletionTriggerKind.Invoked))
    texts = [i.insert_text for i in result.items]
    assert 1 <= len(texts) <= 2 and len(set(texts)) == len(texts)


@pytest.mark.asyncio(loop_scope="module")
async def test_items_extend_the_selected_completion(client: LanguageClient):
    selected = types.SelectedCompletionInfo(
        range=types.Range(start=types.Position(line=4, character=16), end=types.Position(line=4, character=18)),
        text="os.path")
    result = await client.text_document_inline_completion_async(inline_params(4, 18, selected=selected))
    assert result.items
    for item in result.items:
        assert item.insert_text.startswith("os.path")
        assert item.range.start == selected.range.start and item.range.start.line == item.range.end.line


@pytest.mark.asyncio(loop_scope="module")
async def test_completion_fallback_carries_the_whole_completion(client: LanguageClient):
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=types.Position(line=4, character=14)))
    assert len(result.items) == 1
    for item in result.items:
        assert item.text_edit.new_text.startswith("os")  # the word before the cursor is part of the edit
        assert item.text_edit.range.start == types.Position(line=4, character=12)
        assert item.text_edit.range.end == types.Position(line=4, character=14)


@pytest.mark.asyncio(loop_scope="module")
async def test_incremental_edits_then_complete(client: LanguageClient):
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=5, character=4), end=types.Position(line=5, character=4)),
            text="names.sort(")]))
    result = await client.text_document_inline_completion_async(inline_params(5, 15))
    assert len(result.items) == 1 and result.items[0].insert_text.strip()


@pytest.mark.asyncio(loop_scope="module")
async def test_bad_positions_and_unknown_documents_are_errors_not_crashes(client: LanguageClient):
    with pytest.raises(Exception, match="past the end of line"):
        await client.text_document_inline_completion_async(inline_params(0, 99))
    with pytest.raises(Exception, match="past the end of the document"):
        await client.text_document_inline_completion_async(inline_params(99, 0))
    with pytest.raises(Exception, match="not open"):
        await client.text_document_inline_completion_async(inline_params(0, 0, uri="file:///nowhere.py"))
    assert len((await client.text_document_inline_completion_async(inline_params(5, 4))).items) == 1  # serving


@pytest.mark.asyncio(loop_scope="module")
async def test_disabled_languages_and_huge_documents_get_empty_results(client: LanguageClient):
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri="file:///notes.md", language_id="markdown", version=1, text="# notes\n")))
    result = await client.text_document_inline_completion_async(inline_params(1, 0, uri="file:///notes.md"))
    assert list(result.items) == []
    huge = "x = 1\n" * 800_000
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri="file:///huge.py", language_id="python", version=1, text=huge)))
    result = await client.text_document_inline_completion_async(inline_params(10, 0, uri="file:///huge.py"))
    assert list(result.items) == []
    assert any("exceeds the limit" in m.message for m in client.log_messages)


@pytest.mark.asyncio(loop_scope="module")
async def test_cancel_request_stops_a_long_completion(client: LanguageClient):
    import asyncio

    from pygls.exceptions import JsonRpcRequestCancelled

    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"nestling": {"maxTokens": 1000, "lineMode": "multi"}}))
    future = client.protocol.send_request(types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(7, 0),
                                          msg_id="long-request")
    # The tiny model never stops by itself but is fast: on a Zen 4 EPYC 1,000 tokens took under 50 ms once the
    # module's earlier requests had warmed the server, so a 50 ms pause let the request finish first. Cancel
    # right after sending (the notification follows the request on the same stream), while the request is
    # queued or running; both must end in a cancellation.
    await asyncio.sleep(0)
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="long-request"))
    with pytest.raises(JsonRpcRequestCancelled):
        await asyncio.wrap_future(future)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"nestling": {"maxTokens": 8, "lineMode": "auto"}}))
    assert len((await client.text_document_inline_completion_async(inline_params(5, 4))).items) == 1


@pytest.mark.asyncio(loop_scope="module")
async def test_bad_settings_changed_later_are_reported_and_the_embedded_engine_keeps_serving(client: LanguageClient):
    before = await client.text_document_inline_completion_async(inline_params(5, 4))  # the engine is up
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"nestling": {"maxTokens": 0, "daemon": {"autoStart": False}}}))  # autoStart: a new backend
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"nestling": {"daemon": "socket"}}))
    await asyncio.sleep(0.5)  # the notifications' handlers have run
    after = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(5, 4)), 60)
    assert len(after.items) == len(before.items) == 1  # the tiny model writes something; a stopped engine nothing
    messages = [m.message for m in client.log_messages]
    assert "nestling: ignored settings maxTokens=0" in messages
    assert "nestling: ignored settings daemon='socket'" in messages
    assert not any("completion failed" in m for m in messages)
