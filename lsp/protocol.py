"""The language server's JSON-RPC and document layer (pygls 2.1 underneath): a client's bad message gets an error
response and one log line (pygls answers none, logs a traceback and pops up "Error in server"), and documents count
lines as LSP does."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from urllib.parse import unquote

import cattrs
from cattrs.v import format_exception
from lsprotocol import types
from pygls.exceptions import (JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams, JsonRpcInvalidRequest,
                              JsonRpcParseError, JsonRpcServerNotInitialized)
from pygls.protocol import JsonRPCProtocol, LanguageServerProtocol, lsp_method
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage
from pygls.workspace import TextDocument, Workspace

from . import convert

log = logging.getLogger(__name__)
UNPARSABLE = (json.JSONDecodeError, UnicodeDecodeError)  # what json.loads raises for a body that is not JSON


HEADER_AT_LINE_END = re.compile(rb"Content-Length: \d+\r\n$")


class ResyncingInput:
    """Standard input as pygls reads it (a line per header, then the body), found again after a message whose
    Content-Length did not match its body: pygls takes a header only as a line of its own, so the bytes left over (a
    length counted in characters, not bytes) glued onto the next header, and every later body swallowed the header
    after it: no request was answered again, without a word (QA). A line that ends in a Content-Length header is read
    as that header; what came before it is dropped, with a log line."""

    def __init__(self, stream):
        self.stream = stream

    def readline(self) -> bytes:
        line = self.stream.readline()
        if line.startswith(b"Content-Length:") or not (found := HEADER_AT_LINE_END.search(line)):
            return line
        log.warning("dropped %d bytes before a message header: the message before them had a Content-Length other "
                    "than its body's length in bytes", found.start())
        return line[found.start():]

    def read(self, size: int) -> bytes:
        return self.stream.read(size)


class LspTextDocument(TextDocument):
    """A document whose lines and incremental edits follow LSP's line breaks (\\n, \\r\\n, \\r), not str.splitlines'."""

    @property
    def lines(self):
        return tuple(convert.lsp_lines(self.source))

    def _apply_incremental_change(self, change: types.TextDocumentContentChangePartial) -> None:
        problem = convert.change_problem(self.source, change.range, self.position_codec.encoding)
        if problem:
            log.warning("textDocument/didChange of %s: %s", self.uri, problem)
        self._source = convert.apply_change(self.source, change.range, change.text, self.position_codec.encoding)


class LspWorkspace(Workspace):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.stale_versions_told: set[str] = set()  # documents whose edit came with an old version (logged once each)

    def check_version(self, text_doc: types.VersionedTextDocumentIdentifier) -> None:
        """A log line (once per document) for an edit whose version is not above the document's: it is applied as sent
        (a client that never counts versions right still gets completions on its text), but the editor may have sent
        its edits out of order."""
        document = self.get_text_document(text_doc.uri)
        if document.version is not None and text_doc.version <= document.version and \
                document.uri not in self.stale_versions_told:
            self.stale_versions_told.add(document.uri)
            log.warning("textDocument/didChange of %s: version %d after version %d (versions must grow): applied as "
                        "sent; the editor's text and the server's may differ", text_doc.uri, text_doc.version,
                        document.version)

    def _create_text_document(self, doc_uri, source=None, version=None, language_id=None) -> TextDocument:
        return LspTextDocument(doc_uri, source=source, version=version, language_id=language_id,
                               sync_kind=self._sync_kind, position_codec=self.position_codec)


@dataclass(frozen=True)
class Rejected:
    """A message that could not be read into its type: what handle_message answers instead of handling it."""

    msg_id: int | str | None
    error: JsonRpcException
    answer: bool  # a request (its sender waits for a response)
    method: str | None


class NestlingProtocol(LanguageServerProtocol):
    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):
        """pygls's, with documents kept in an LspWorkspace (made as soon as pygls has made its workspace, before the
        server's initialize handler runs and any document is opened)."""
        steps, sent = super().lsp_initialize(params), None
        while True:
            try:
                step = steps.send(sent)
            except StopIteration as done:
                self._use_lsp_workspace()
                return done.value
            self._use_lsp_workspace()
            sent = yield step

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        """pygls's, after the version check (once for all the changes, which share the version)."""
        self._workspace.check_version(params.text_document)
        yield from super().lsp_text_document__did_change(params)

    def _use_lsp_workspace(self) -> None:
        old = self._workspace
        if old is not None and not isinstance(old, LspWorkspace):
            self._workspace = LspWorkspace(old.root_uri, self._server._text_document_sync_kind,
                                           list(old.folders.values()), old.position_encoding)

    def structure_message(self, data):
        """As pygls's (json.loads hands it every object; only a message has "jsonrpc"), but a message that does not
        fit its type becomes a Rejected for handle_message to answer, instead of an exception out of json.loads."""
        if not isinstance(data, dict) or "jsonrpc" not in data:
            return data
        try:
            _check_positions(data.get("params"), "$.params")
            return self._converter.structure(data, self._message_type(data))
        except Exception as exc:
            msg_id = data.get("id")
            msg_id = msg_id if type(msg_id) in (int, str) else None
            method = data.get("method") if isinstance(data.get("method"), str) else None
            return Rejected(msg_id, _structure_error(exc, method), answer="method" in data, method=method)

    def _message_type(self, data: dict):
        if "id" in data:
            if "error" in data:
                return types.ResponseErrorMessage
            if "method" in data:
                return self.get_message_type(data["method"]) or JsonRPCRequestMessage
            return self._result_types.pop(data["id"], None) or JsonRPCResponseMessage
        return self.get_message_type(data.get("method", "")) or JsonRPCNotification

    def handle_message(self, message):
        if isinstance(message, Rejected):
            self.reject(message.msg_id, message.error, answer=message.answer, method=message.method)
            if not message.answer and message.msg_id in self._request_futures:  # a response to our request
                self._request_futures.pop(message.msg_id).set_exception(message.error)
            return
        if getattr(message, "jsonrpc", None) != JsonRPCProtocol.VERSION:  # JSON, but no JSON-RPC 2.0 message
            msg_id = message.get("id") if isinstance(message, dict) else getattr(message, "id", None)
            self.reject(msg_id if type(msg_id) in (int, str) else None,
                        JsonRpcInvalidRequest("Invalid Request: not a JSON-RPC 2.0 message"))
            return
        method = getattr(message, "method", None)
        error = self._out_of_turn(message, method)
        if error is not None:
            request = method is not None and hasattr(message, "id")
            self.reject(message.id if request else None, error, answer=request, method=method)
            return
        super().handle_message(message)

    @property
    def shut_down(self) -> bool:
        """Whether the client asked the server to shut down (its exit status is 0 after that, 1 without)."""
        return self._shutdown

    def _out_of_turn(self, message, method: str | None) -> JsonRpcException | None:
        """The error for a well-formed message the server cannot take now (pygls would answer a request before initialize
        with an internal error and its traceback, leave a request after shutdown unanswered, take a second initialize
        and drop the open documents, and pop up "Error in server" for an edit
        of a document that is not open or a cancellation of an id that is no id)."""
        request = method is not None and hasattr(message, "id")
        if self._workspace is None and method not in (None, types.INITIALIZE, types.EXIT):  # (a notification: dropped)
            return JsonRpcServerNotInitialized(f"Server not initialized: {method} before initialize")
        if self._shutdown and request and method != types.EXIT:
            return JsonRpcInvalidRequest(f"Invalid request: {method} after shutdown (only exit is accepted now)")
        if method == types.INITIALIZE and self._workspace is not None:
            return JsonRpcInvalidRequest("Invalid request: initialize was sent already (once per session)")
        if method == types.CANCEL_REQUEST and type(getattr(message.params, "id", None)) not in (int, str):
            return JsonRpcInvalidParams(f"Invalid params of {method}: the id must be a number or a string")
        if method == types.TEXT_DOCUMENT_DID_CHANGE and self._workspace is not None:
            uri = message.params.text_document.uri
            if unquote(uri) not in self._workspace.text_documents:
                return JsonRpcInvalidParams(f"Invalid params of {method}: document {uri} is not open "
                                            "(send textDocument/didOpen first)")
        return None

    def reject_unparsable(self, error: Exception) -> None:
        """A message body that is not JSON: a parse error, for the request's id when its first members name one."""
        text = error.doc if isinstance(error, json.JSONDecodeError) else error.object.decode("utf-8", "replace")
        self.reject(convert.request_id(text), JsonRpcParseError(f"Parse error: {error}"))

    def _send_handler_result(self, future, *, msg_id):
        """A handler's JsonRpcException (invalid params, say) is the client's error: answered by reject, one log
        line; other exceptions, server faults, as pygls answers them (with their traceback)."""
        error = None if future.cancelled() else future.exception()
        if isinstance(error, JsonRpcException) and not isinstance(error, JsonRpcInternalError):
            self._request_futures.pop(msg_id, None)
            self.reject(msg_id, error)
            return
        super()._send_handler_result(future, msg_id=msg_id)

    def reject(self, msg_id: int | str | None, error: JsonRpcException, answer: bool = True,
               method: str | None = None) -> None:
        """Where every bad message from the client ends: one log line (no traceback: the fault is the client's, and
        no pop-up), and, for a request, the JSON-RPC error response for its id (null when it has none we can read)."""
        what = method or ("a message" if msg_id is None else "a request")  # ("a message 5" read as a count)
        what += "" if msg_id is None else f" (id {msg_id!r})"
        log.warning("refused %s from the client: %s (%d)", what, error.message, error.code)
        if answer:
            self._send_data({"jsonrpc": JsonRPCProtocol.VERSION, "id": msg_id,
                             "error": self._converter.unstructure(error.to_response_error())})


POSITION_FIELDS = ("line", "character")  # what cattrs would take as an int from 1.5 (1), true (1) or "5" (5)


class PositionError(ValueError):
    """A position's line or character that is no integer, with where it is in the message."""


def _check_positions(value, path: str) -> None:
    """A PositionError for a position's line or character that is no JSON integer (cattrs turned 1.5 into 1, true into
    1 and "5" into 5: a client's bug went on as a position it never meant)."""
    if isinstance(value, dict):
        if set(POSITION_FIELDS) <= value.keys():
            for key in POSITION_FIELDS:
                number = value[key]
                if isinstance(number, bool) or not isinstance(number, int):
                    raise PositionError(f"{key} must be an integer, not {number!r} @ {path}.{key}")
        for key, item in value.items():
            _check_positions(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_positions(item, f"{path}[{index}]")


def _structure_error(exc: Exception, method: str | None) -> JsonRpcException:
    """Invalid params (-32602) naming each field at fault and why, or invalid request (-32600) when what is wrong
    lies outside the params."""
    def describe(error, kind):
        said = format_exception(error, kind)  # "invalid value (for type, expected int)", or what else cattrs says
        return f"{said} ({error})" if type(error) is ValueError else said

    if isinstance(exc, cattrs.BaseValidationError):
        problems = cattrs.transform_error(exc, path="$", format_exception=describe)
    elif isinstance(exc, PositionError):
        problems = [str(exc)]
    else:
        problems = [f"{type(exc).__name__}: {exc}"]
    where = f" of {method}" if method else ""
    if problems and all(p.endswith("@ $.params") or "@ $.params." in p for p in problems):
        return JsonRpcInvalidParams(f"Invalid params{where}: {'; '.join(problems)}")
    return JsonRpcInvalidRequest(f"Invalid request{where}: {'; '.join(problems)}")


def quiet_unparsable(record: logging.LogRecord) -> bool:
    """A filter for pygls's server logger: drops its traceback for a body that is not JSON (reject_unparsable logs
    that one line)."""
    return not (record.exc_info and isinstance(record.exc_info[1], UNPARSABLE))
