"""`nestling lsp`: inline completions (LSP 3.18) and a completion-menu fallback, served from the shared daemon.

Handlers are thin: validate the position, build a query, await the backend, convert back. Model work
never runs on the event loop; $/cancelRequest cancels the handler's task and with it the daemon call.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from . import convert
from .backend import BackendError, DaemonBackend, EmbeddedBackend, Opened, Query, TokenError
from .protocol import UNPARSABLE, NestlingProtocol, quiet_unparsable
from .settings import Settings, merge

log = logging.getLogger(__name__)
VERSION = "0.1.0"
RESTART = "Restart the daemon"  # the action offered when the daemon runs other code than the installed


class NestlingLanguageServer(LanguageServer):
    def __init__(self, make_backend):
        super().__init__("nestling", VERSION, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         protocol_cls=NestlingProtocol)
        logging.getLogger("pygls.server").addFilter(quiet_unparsable)  # (once: the same filter is added once)
        self.make_backend = make_backend  # Settings -> DaemonBackend | EmbeddedBackend
        self.settings = Settings()
        self.backend: DaemonBackend | EmbeddedBackend | None = None
        self.prefilling: asyncio.Task | None = None  # the prefill of the document opened last, until it ends
        self.ready: asyncio.Task | None = None  # the backend's start at initialization (prefills wait for it)
        self.offer: asyncio.Task | None = None  # the question whether to restart a daemon that runs other code
        self.told_token_for = None  # the backend whose missing or wrong token the user was shown (once per backend)

    def report_server_error(self, error: Exception, source) -> None:
        """A message body that is not JSON gets a parse error response (pygls's pop-up "Error in server" for it);
        other faults as pygls reports them."""
        if isinstance(error, UNPARSABLE) and source is JsonRpcException:
            self.protocol.reject_unparsable(error)
            return
        super().report_server_error(error, source)

    def tell(self, problem: BackendError, log_only: bool = False) -> None:
        """A backend problem for the user: an error message, but for a completion's only a log message (they come
        per keystroke), except the token's, which the user is shown once per backend (it fails every request)."""
        if isinstance(problem, TokenError):  # shown the first time for this backend, logged after that
            log_only, self.told_token_for = self.told_token_for is self.backend, self.backend
        message = f"nestling: {problem}"
        if log_only:
            self.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=message))
        else:
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=message))

    def progress(self):
        """A reporter for backend start-up, shown as $/progress when the client supports it."""
        capabilities = self.client_capabilities.window
        if not (capabilities and capabilities.work_done_progress):
            return None
        token, created = str(uuid.uuid4()), None

        def report(phase: str, message: str | None) -> None:
            nonlocal created
            if phase == "begin" and created is None:  # a token only for progress there is (not one per request), and
                # no callback on its creation, which pygls logged as an ERROR when a shutdown cancelled it
                created = self.protocol.send_request(types.WINDOW_WORK_DONE_PROGRESS_CREATE,
                                                     types.WorkDoneProgressCreateParams(token=token))
            if created is not None and not created.done() and phase == "end":  # (a load that failed at once)
                created.add_done_callback(lambda done: done.cancelled() or done.exception() or report(phase, message))
                return
            if created is None or (not created.done() and phase != "begin"):
                return
            if phase == "begin":
                self.work_done_progress.begin(token, types.WorkDoneProgressBegin(title="nestling", message=message))
            elif phase == "report":
                self.work_done_progress.report(token, types.WorkDoneProgressReport(message=message))
            else:
                self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))

        return report


def in_its_line(ls: NestlingLanguageServer, uri: str, position: types.Position) -> types.Position:
    """The request's position, its character taken back to its line's end where it lies past it, as the LSP spec
    says (a line past the document's end stays an error: query_for)."""
    document = ls.workspace.text_documents.get(unquote(uri))
    if document is None:
        return position
    inside = convert.within_line(document.source, position, document.position_codec.encoding)
    if inside != position:
        log.info("%s: position %d:%d lies past its line's end: taken as the line's end (character %d)", uri,
                 position.line, position.character, inside.character)
    return inside


def query_for(ls: NestlingLanguageServer, uri: str, position: types.Position, alternatives: int,
              selected: types.SelectedCompletionInfo | None = None) -> tuple[Query, str]:
    """(the backend query, the selected text to prefix items with); InvalidParams for a bad document/position."""
    if unquote(uri) not in ls.workspace.text_documents:  # kept under the decoded URI (VS Code encodes spaces, ...)
        raise JsonRpcInvalidParams(f"document {uri} is not open (send textDocument/didOpen first)")
    document = ls.workspace.get_text_document(uri)
    try:
        cursor = convert.cursor_offset(document, position)
        text, prefix_text = document.source, ""
        if selected is not None:
            start = convert.cursor_offset(document, selected.range.start)
            end = convert.cursor_offset(document, selected.range.end)
            if not start <= cursor <= end:
                raise ValueError("selectedCompletionInfo.range must hold the position (the text the selected item "
                                 "replaces, around the cursor)" if start <= end else
                                 "selectedCompletionInfo.range ends before it starts")
            text, cursor = convert.apply_selected(document.source, start, end, selected.text)
            prefix_text = selected.text
    except ValueError as exc:
        raise JsonRpcInvalidParams(str(exc)) from None
    settings = ls.settings
    query = Query(uri=uri, language_id=document.language_id or "", text=convert.encodable(text), cursor=cursor,
                  max_tokens=settings.max_tokens, line_mode=settings.line_mode, alternatives=alternatives)
    return query, prefix_text


async def run_query(ls: NestlingLanguageServer, query: Query) -> list[str]:
    if not ls.settings.enabled_for(query.language_id):
        return []
    try:
        return await ls.backend.complete(query, ls.progress())
    except BackendError as exc:
        ls.tell(exc, log_only=True)
        return []


def build_server(make_backend) -> NestlingLanguageServer:
    server = NestlingLanguageServer(make_backend)

    @server.feature(types.INITIALIZE)
    def initialize(ls: NestlingLanguageServer, params: types.InitializeParams):
        ls.settings = merge(ls.settings, params.initialization_options)
        ls.backend = ls.make_backend(ls.settings)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: NestlingLanguageServer, params: types.InitializedParams):
        _report_problems(ls)
        ls.ready = asyncio.ensure_future(_warm_up(ls))

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: NestlingLanguageServer, params: types.DidChangeConfigurationParams):
        before = ls.settings
        ls.settings = merge(before, params.settings)
        _report_problems(ls)
        connection = ("socket", "tcp", "token", "auto_start")  # what the backend is made with
        if any(getattr(ls.settings, name) != getattr(before, name) for name in connection):
            old, ls.backend = ls.backend, ls.make_backend(ls.settings)
            if old is not ls.backend:  # (the embedded engine is one per process: kept)
                await old.close()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: NestlingLanguageServer, params: types.DidOpenTextDocumentParams):
        document = ls.workspace.get_text_document(params.text_document.uri)
        if ls.settings.prefill_on_open and ls.settings.enabled_for(document.language_id or ""):
            text = convert.encodable(document.source)  # the cursor is unknown: its end makes the prompt cover the
            # file's last window
            opened = Opened(uri=document.uri, language_id=document.language_id or "", text=text, cursor=len(text))
            if ls.prefilling is not None:
                ls.prefilling.cancel()  # the newest document wins; cancelled here, an older request can't arrive later
            ls.prefilling = asyncio.ensure_future(_prefill(ls, opened))

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(ls: NestlingLanguageServer, params: types.InlineCompletionParams):
        invoked = params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
        selected = params.context.selected_completion_info
        position = in_its_line(ls, params.text_document.uri, params.position)
        if selected is not None:
            selected = types.SelectedCompletionInfo(range=types.Range(
                start=in_its_line(ls, params.text_document.uri, selected.range.start),
                end=in_its_line(ls, params.text_document.uri, selected.range.end)), text=selected.text)
        query, prefix_text = query_for(ls, params.text_document.uri, position,
                                       ls.settings.alternatives if invoked else 1, selected)
        texts = await run_query(ls, query)
        at_cursor = types.Range(start=position, end=position)
        return convert.inline_list(texts, prefix_text, selected.range if selected else at_cursor)

    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[".", "(", " "]))
    async def completion(ls: NestlingLanguageServer, params: types.CompletionParams):
        position = in_its_line(ls, params.text_document.uri, params.position)
        query, _ = query_for(ls, params.text_document.uri, position, 1)
        texts = await run_query(ls, query)
        line_before = query.text[: query.cursor].rsplit("\n", 1)[-1]
        word = convert.word_before(line_before)
        start = types.Position(line=position.line, character=position.character - len(word.encode("utf-16-le")) // 2)
        items = [convert.completion_item(t, word, types.Range(start=start, end=position)) for t in texts]
        return types.CompletionList(is_incomplete=True, items=items)

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: NestlingLanguageServer, params):
        if ls.backend is not None:
            await ls.backend.close()

    return server


def _report_problems(ls: NestlingLanguageServer) -> None:
    if ls.settings.problems:
        ls.window_log_message(types.LogMessageParams(
            type=types.MessageType.Warning, message=f"nestling: ignored settings {', '.join(ls.settings.problems)}"))


async def _warm_up(ls: NestlingLanguageServer) -> None:
    """Start (or find) the daemon right away, so the first keystroke does not wait for the model."""
    try:
        await ls.backend.ensure_ready(ls.progress())
        notice = await ls.backend.stale_notice()
    except BackendError as exc:
        ls.tell(exc)
        return
    if notice and ls.backend.can_restart:  # asked apart: prefills wait for the warm-up, not for the user's answer
        ls.offer = asyncio.ensure_future(_offer_restart(ls, notice))
    elif notice:
        ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=f"nestling: {notice}"))


async def _offer_restart(ls: NestlingLanguageServer, notice: str) -> None:
    """Ask whether to restart a daemon that runs other code than this server (started before an upgrade); restart
    it if the user says so."""
    try:
        answer = await ls.window_show_message_request_async(types.ShowMessageRequestParams(
            type=types.MessageType.Warning, message=f"nestling: {notice}",
            actions=[types.MessageActionItem(title=RESTART), types.MessageActionItem(title="Not now")]))
    except Exception as exc:  # a client without window/showMessageRequest: the notice as a plain warning
        log.info("no answer to the restart question: %s", exc)
        ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=f"nestling: {notice}"))
        return
    if answer is None or answer.title != RESTART:
        return
    try:
        await ls.backend.restart(ls.progress())
    except BackendError as exc:
        ls.tell(exc)


async def _prefill(ls: NestlingLanguageServer, opened: Opened) -> None:
    if ls.ready is not None:
        await asyncio.shield(ls.ready)  # the backend is up (or failed to start, which _warm_up reports)
    await ls.backend.prefill(opened)


def daemon_backend_factory(serve_args=()):
    return lambda s: DaemonBackend(s.socket, s.tcp, s.token, s.auto_start, serve_args)


def embedded_backend_factory(load_runtime, config=None):
    backend = {}

    def make(settings: Settings):
        if "instance" not in backend:  # one engine per process, whatever the settings say later
            backend["instance"] = EmbeddedBackend(load_runtime, config)
        return backend["instance"]

    return make
