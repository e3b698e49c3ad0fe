"""The completion service: one request in, completion items and stats out. No protocol types here.

Runs on the model worker thread: session lookup, incremental syntax update and the region at the
cursor, the FIM prompt (sticky window, so the previous prompt's KV is reused), speculative or
autoregressive generation with the region's tree budget, early stop at the end of the block, and
post-processing. A prefill request (a file was opened) does the same up to the prompt's prefill, so the
first completion in the file finds the prompt's model state ready. After a completion the worker may also
prefill ahead: the prompts the next request would have if the user typed the completion's first character, or
accepted it whole (the second guess into a spare model state).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from ..context.fim import FimBudget, LfDocument, build_fim_prompt, lf_only
from ..context.languages import file_name_hint, find_language, uri_file_name
from ..context.syntax import Region, SyntaxDocument
from ..speculative.accept import Sampling
from ..speculative.engine import StopRule
from ..speculative.prefill_pace import PrefillPace
from .config import ServiceConfig
from .postprocess import block_end, cursor_context, finalize, line_mode, settled_text
from .sessions import PastCompletion, SessionStore

log = logging.getLogger(__name__)

LINE_MODES = ("auto", "single", "multi")


class InvalidRequest(ValueError):
    """A request field is wrong; `field` names it."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


class TooManyTokens(InvalidRequest):
    """options.max_tokens is outside 0..limit, the daemon's max_tokens_limit (which a client may ask for instead)."""

    def __init__(self, limit: int):
        super().__init__("options.max_tokens", f"must be 0..{limit}")
        self.limit = limit


class RequestTooLarge(ValueError):
    """The request is over a size limit."""


class Superseded(Exception):
    """A newer request for the same document replaced this one (or the client cancelled it)."""


class DeadlineExceeded(Exception):
    """The request's deadline passed before generation finished."""


@dataclass
class CompletionRequest:
    uri: str  # the document's identity (path or URI): requests with the same uri share a session
    language_id: str = ""  # LSP languageId; "" = from the uri's suffix
    client: str = ""  # who asks (an editor's language server): a newer request supersedes an older one for the
    # same uri only from the same client
    text: str | None = None  # the whole document, with `cursor` ...
    cursor: int | None = None  # ... the cursor as a code-point offset into text
    prefix: str | None = None  # or only the text before ...
    suffix: str | None = None  # ... and after the cursor
    max_tokens: int = 0  # 0 = the configured default
    line_mode: str = "auto"  # auto | single | multi
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    alternatives: int = 1  # distinct completions wanted
    stop: tuple[str, ...] = ()
    mode: str = "spec"  # spec | ar
    seed: int | None = None
    deadline: float | None = None  # time.monotonic() after which generation stops


@dataclass
class PrefillRequest:
    """Prepare a document's model state ahead of its first completion request (same document fields)."""

    uri: str
    language_id: str = ""
    client: str = ""
    text: str | None = None
    cursor: int | None = None  # where a completion is expected; a client that can't tell gives len(text)
    prefix: str | None = None
    suffix: str | None = None
    # 0: a client's (a file opened); n > 0: the service's n-th guess at the next request's prompt (prefill ahead: the
    # first into the session's model state, the second into its spare)
    ahead: int = 0


# prompt tokens a prefill ahead computes between checks for a request: a keystroke that did not type the guess waits at
# most this chunk (~0.1 s on a 2-core CPU) instead of a file-open prefill's
AHEAD_CHUNK_TOKENS = 32
# a file-open prefill's first chunk before the service has timed one (then sized by prefill_chunk_ms)
FIRST_PREFILL_CHUNK_TOKENS = 64
# a completion's own prompt, where more than this is new, is computed in chunks of this many tokens (the last one in
# the generation's own forward), so that a newer request, the client's cancel or its deadline stops it within one
# (~1.3 s on a 2-core CPU with the default model). It costs a document's first request ~9% more time to its first
# token there (a prompt of ~930 tokens in two forwards, not one), paced file-open chunks (~350 ms) 12%
# (BENCHMARKS.md, "A document's first request, in chunks")
COMPLETION_CHUNK_TOKENS = 512



def session_key(request: CompletionRequest | PrefillRequest) -> str:
    """The session a request belongs to: its document's, per client (two editors with the same file open each keep
    their own model state, draft hints and guesses; a request without a client shares the uri's)."""
    return request.uri if not request.client else f"{request.uri}\0{request.client}"


@dataclass
class PrefillResult:
    prompt_tokens: int = 0  # tokens in the prompt prepared
    reused_tokens: int = 0  # of them already in the session's model state
    prefilled_tokens: int = 0  # of them computed now
    complete: bool = False  # False: a completion request or a newer prefill interrupted it (what was done stays)
    total_ms: float = 0.0


@dataclass
class CompletionItem:
    text: str  # to insert at the cursor
    replace_start: int  # code-point offsets of what it replaces (start == end == cursor: nothing)
    replace_end: int


@dataclass
class CompletionStats:
    tokens: int = 0
    tau: float = 0.0
    prompt_tokens: int = 0
    reused_prefix_tokens: int = 0
    time_to_first_token_ms: float = 0.0
    total_ms: float = 0.0
    queue_ms: float = 0.0
    region: str = Region.NEUTRAL.value
    stop_reason: str = ""
    mode: str = "spec"
    line_mode: str = ""  # single or multi: the request's line mode, auto resolved at the cursor
    prepared_ahead: bool = False  # a prefill ahead had computed the prompt: its guess was right


@dataclass
class CompletionResult:
    items: list[CompletionItem] = field(default_factory=list)
    stats: CompletionStats = field(default_factory=CompletionStats)


def fitted_budget(config: ServiceConfig, positions: int | None) -> FimBudget:
    """The prompt budget of prefix_tokens and suffix_tokens, cut (with a warning) where the two leave the model too few
    of its positions to write in (FimBudget.fitted)."""
    budget = FimBudget(prefix_tokens=config.prefix_tokens, suffix_tokens=config.suffix_tokens)
    fitted = budget.fitted(positions)
    if fitted != budget:
        log.warning("prefix_tokens %d and suffix_tokens %d leave the model (%d positions) too little room to write: "
                    "prompts take %d and %d", budget.prefix_tokens, budget.suffix_tokens, positions,
                    fitted.prefix_tokens, fitted.suffix_tokens)
    return fitted


class CompletionService:
    def __init__(self, runtime, config: ServiceConfig):
        self.runtime = runtime
        self.config = config
        self.sessions = SessionStore(config.cache_limit_mb * 1024 * 1024)
        self.budget = fitted_budget(config, runtime.target.positions)
        self._engines: dict[str, object] = {}
        # file-open prefills: chunks sized in time by the device's cost curve (or fixed by prefill_chunk_tokens);
        # timed across requests
        self.prefill_pace = PrefillPace(chunk_ms=None if config.prefill_chunk_tokens else config.prefill_chunk_ms,
                                        first_tokens=config.prefill_chunk_tokens or FIRST_PREFILL_CHUNK_TOKENS,
                                        cost=lambda tokens: runtime.profile.verify_cost(tokens))

    def _room(self, max_tokens: int, prompt: list[int]) -> int:
        """`max_tokens`, or fewer where the prompt leaves less room in the model's positions (at least one token)."""
        positions = self.runtime.target.positions
        return max(1, min(max_tokens, positions - len(prompt))) if positions else max_tokens

    # ---- validation: cheap, on the event loop, before the request is queued --------------------------

    def validate(self, request: CompletionRequest | PrefillRequest) -> None:
        if not request.uri:
            raise InvalidRequest("document.uri", "must not be empty")
        if request.text is not None:
            if request.cursor is None or not 0 <= request.cursor <= len(request.text):
                raise InvalidRequest("document.full.cursor_offset",
                                     f"{request.cursor} is outside the text (0..{len(request.text)})")
            size = len(request.text)
        elif request.prefix is not None:
            size = len(request.prefix) + len(request.suffix or "")
        else:
            raise InvalidRequest("document.content", "give either full (text and cursor) or parts (prefix and suffix)")
        if size > self.config.max_document_chars:
            raise RequestTooLarge(f"document.content: {size} characters exceeds the limit of "
                                  f"{self.config.max_document_chars}")
        if isinstance(request, CompletionRequest):
            self._validate_options(request)

    def _validate_options(self, request: CompletionRequest) -> None:
        if request.max_tokens < 0 or request.max_tokens > self.config.max_tokens_limit:
            raise TooManyTokens(self.config.max_tokens_limit)
        if request.line_mode not in LINE_MODES:
            raise InvalidRequest("options.line_mode", f"unknown mode {request.line_mode!r}")
        if not (request.temperature >= 0.0 and request.temperature <= 10.0):
            raise InvalidRequest("options.temperature", "must be in [0, 10]")
        if not 0.0 < request.top_p <= 1.0:
            raise InvalidRequest("options.top_p", "must be in (0, 1]")
        if not 1 <= request.alternatives <= 8:
            raise InvalidRequest("options.alternatives", "must be 1..8")
        if request.mode not in ("spec", "ar"):
            raise InvalidRequest("options.mode", f"unknown mode {request.mode!r}")
        if any(not s for s in request.stop) or len(request.stop) > 16:
            raise InvalidRequest("options.stop", "at most 16 non-empty strings")

    # ---- the work: on the model worker thread ---------------------------------------------------------

    def _engine(self, mode: str):
        if mode not in self._engines:
            self._engines[mode] = self.runtime.engine(mode)
        return self._engines[mode]

    def complete(self, request: CompletionRequest, cancel: threading.Event | None = None,
                 on_text: Callable[[str], None] | None = None, queued_at: float | None = None) -> CompletionResult:
        started = time.monotonic()
        session = self.sessions.get(session_key(request))
        document = _document(request)
        text, cursor = document.text, document.cursor
        prefix, suffix = text[:cursor], text[cursor:]
        language = find_language(request.language_id or None, request.uri)
        region = self._region(session, language, text, cursor)
        prompt = self._prompt(session, request.uri, request.language_id, prefix, suffix)
        context = cursor_context(prefix, suffix, region, language)
        shape = line_mode(request.line_mode, context)
        mode = self.config.mode if request.mode == "spec" else "ar"
        used_guess = 2 if session.take_closer_spare(mode, prompt.token_ids) else 1
        engine, state = self._engine_and_state(session, mode)
        budget = self.runtime.budget_for(mode, region)
        expected = self._expected(session, prefix, suffix)
        ahead_end, session.ahead_end, session.spare_ahead_end = session.ahead_end, 0, 0
        accept_guess, session.accept_guess = session.accept_guess, 0
        early = self._prefill_in_chunks(engine, state, prompt.token_ids, cancel, request.uri)
        texts: list[str] = []
        stats = CompletionStats(region=region.value, mode=mode, line_mode=shape)  # (mode spec: the daemon's --mode,
        # lookup say)
        for index in range(request.alternatives):
            sampling = self._sampling(request, index)
            stop = StopRule(max_new_tokens=self._room(request.max_tokens or self.config.max_tokens, prompt.token_ids),
                            stop_strings=tuple(request.stop), deadline=request.deadline, cancel=cancel,
                            text_end=lambda t: block_end(t, context, shape))
            generation = engine.generate(prompt.token_ids, sampling, stop, state=state, budget=budget,
                                         expected=expected if index == 0 else None)
            streamed = ""
            for _ in generation:
                settled = settled_text(generation.text or "") if index == 0 and on_text is not None else ""
                if len(settled) > len(streamed) and settled.startswith(streamed):
                    on_text(document.in_its_line_breaks(settled[len(streamed):]))
                    streamed = settled
            if index == 0:
                self._fill_stats(stats, generation.stats, started, queued_at, early)
                stats.prepared_ahead = ahead_end > 0 and request.mode == "spec" and \
                    stats.reused_prefix_tokens >= min(ahead_end, stats.prompt_tokens - 1)
                if stats.prepared_ahead and accept_guess:
                    session.accept_first = used_guess == accept_guess
                session.remember(PastCompletion.at(prefix, suffix, generation.text or ""))
            if generation.stats.stop_reason in ("cancelled", "deadline"):
                stats.stop_reason = generation.stats.stop_reason
                break
            final = finalize(generation.text or "", context, shape)
            if final and final not in texts:
                texts.append(final)
        stats.total_ms = (time.monotonic() - started) * 1000
        self.sessions.enforce_limit(keep=session_key(request))
        if cancel is not None and cancel.is_set():
            raise Superseded(request.uri)
        if stats.stop_reason == "deadline":
            raise DeadlineExceeded(f"deadline passed after {stats.tokens} tokens")
        at = document.raw_cursor  # (the client's offsets: its document's line breaks)
        return CompletionResult([CompletionItem(document.in_its_line_breaks(t), at, at) for t in texts], stats)

    def prefill(self, request: PrefillRequest, cancel: threading.Event | None = None) -> PrefillResult:
        """Parse the document and commit the prompt a completion at the cursor would have (speculative
        requests' state), in chunks: `cancel` (a completion request arrived) stops it between chunks."""
        session = self.sessions.get(session_key(request))
        document = _document(request)
        text, cursor = document.text, document.cursor
        self._region(session, find_language(request.language_id or None, request.uri), text, cursor)
        prompt = self._prompt(session, request.uri, request.language_id, text[:cursor], text[cursor:])
        engine, state = self._engine_and_state(session, self.config.mode)
        if request.ahead > 1:  # the second guess goes to the spare state, from the closer of the two
            state = self._spare_for(session, engine, state, prompt.token_ids)
        chunk = min(AHEAD_CHUNK_TOKENS, self.config.prefill_chunk_tokens or AHEAD_CHUNK_TOKENS) if request.ahead \
            else self.prefill_pace
        stats = engine.prefill(prompt.token_ids, state, cancel, chunk_tokens=chunk)
        if request.ahead and (stats.complete or stats.prefilled_tokens):  # it left the guess's prompt (partly) ready
            if request.ahead == 1:
                session.ahead_end = len(state.tokens)
            else:
                session.spare_ahead_end = len(state.tokens)
        self.sessions.enforce_limit(keep=session_key(request))
        return PrefillResult(prompt_tokens=stats.prompt_tokens, reused_tokens=stats.reused_tokens,
                             prefilled_tokens=stats.prefilled_tokens, complete=stats.complete,
                             total_ms=stats.total_ms)

    def prefill_ahead_requests(self, request: CompletionRequest, result: CompletionResult) -> list[PrefillRequest]:
        """The prefills that prepare the next request if the user types the first character of the completion shown,
        or accepts it whole; in that order unless the last right guess in the document was an acceptance ([] when
        there is nothing to guess, or it is turned off)."""
        if not (self.config.prefill_ahead and request.mode == "spec" and result.items and result.items[0].text):
            return []
        document = _document(request)
        text, cursor = document.text, document.cursor
        session = self.sessions.get(session_key(request))
        shown = lf_only(result.items[0].text)
        typing = predicted_keystroke(shown)
        guesses = [typing] if shown == typing else [shown, typing] if session.accept_first else [typing, shown]
        session.accept_guess = guesses.index(shown) + 1 if shown != typing else 0
        return [PrefillRequest(uri=request.uri, language_id=request.language_id, client=request.client,
                               text=text[:cursor] + typed + text[cursor:], cursor=cursor + len(typed), ahead=number)
                for number, typed in enumerate(guesses, start=1)]

    def _prompt(self, session, uri: str, language_id: str, prefix: str, suffix: str):
        """The FIM prompt, its window kept where the session's last one started (prefix KV reuse)."""
        prompt = build_fim_prompt(self.runtime.target.tokenizer, self.runtime.target.fim_tokens, prefix, suffix,
                                  path=file_name_hint(uri_file_name(uri), language_id), budget=self.budget,
                                  sticky_start=session.prefix_start)
        session.prefix_start = prompt.prefix_start
        return prompt

    def _expected(self, session, prefix: str, suffix: str) -> list[int]:
        """Tokens the model is expected to write at the cursor: the rest of a recent completion in the document that
        the user has typed (part of) since, or all of one asked at this place; a draft hint only."""
        if not self.config.follow_last_completion:
            return []
        rest = session.expected_text(prefix, suffix)
        return self.runtime.target.tokenizer(rest, add_special_tokens=False)["input_ids"] if rest else []

    def _engine_and_state(self, session, mode: str):
        engine = self._engine(mode)
        return engine, session.states.get(mode) or session.states.setdefault(mode, engine.new_state())

    def _spare_for(self, session, engine, state, prompt: list[int]):
        """The session's spare state for `prompt`: the one it has, or a branch of `state` where that shares more."""
        mode, spare = self.config.mode, session.spare_states.get(self.config.mode)
        shared = state.common_prefix(prompt)
        if spare is None or spare.common_prefix(prompt) < shared:
            spare = session.spare_states[mode] = state.branch(shared, engine.make_drafter())
        return spare

    def _region(self, session, language, text: str, cursor: int) -> Region:
        name = language.name if language else None
        if session.syntax is None or session.language != name:
            session.syntax, session.language = SyntaxDocument(text, language), name
        elif session.syntax.text != text:
            session.syntax.replace(text)
        return session.syntax.region_at(cursor)

    @staticmethod
    def _sampling(request: CompletionRequest, index: int) -> Sampling:
        temperature = request.temperature
        if index > 0 and temperature == 0.0:
            temperature = 0.8  # further alternatives are samples
        seed = None if request.seed is None else (request.seed + index) % 2**64  # seeds are 64-bit
        return Sampling(temperature=temperature, top_p=request.top_p, seed=seed)

    def _prefill_in_chunks(self, engine, state, prompt: list[int], cancel: threading.Event | None, uri: str):
        """Where more than a chunk of the prompt is new (a document's first request, a large edit) and the request can
        be cancelled (a newer one, the client gone or its deadline passed), commit all but its last chunk as a
        file-open prefill does, in chunks of COMPLETION_CHUNK_TOKENS (or prefill_chunk_tokens where set), stopping
        between them once `cancel` is set (raising Superseded; what was done stays for the next request). Returns that
        prefill's stats (None when the prompt was left whole to the generation)."""
        chunk = self.config.prefill_chunk_tokens or COMPLETION_CHUNK_TOKENS
        if cancel is None or len(prompt) - state.common_prefix(prompt) <= chunk:
            return None
        # the last chunk is left to the generation's own forward (which gives the first token's logits)
        stats = engine.prefill(prompt[:-chunk], state, cancel, chunk_tokens=chunk)
        if cancel.is_set():
            raise Superseded(uri)
        return stats

    @staticmethod
    def _fill_stats(stats: CompletionStats, gen_stats, started: float, queued_at: float | None,
                    early=None) -> None:
        """The completion's stats from its generation's, and from the chunked prefill before it (`early`)."""
        stats.tokens = gen_stats.new_tokens
        stats.tau = gen_stats.tau
        stats.prompt_tokens = gen_stats.prompt_tokens
        stats.reused_prefix_tokens = early.reused_tokens if early else gen_stats.reused_tokens
        stats.time_to_first_token_ms = gen_stats.first_token_ms + (early.total_ms if early else 0.0)
        stats.stop_reason = gen_stats.stop_reason
        stats.queue_ms = (started - queued_at) * 1000 if queued_at else 0.0


def predicted_keystroke(shown: str) -> str:
    """What typing the first character of the ghost text `shown` inserts: that character, or after a line break
    also the next line's indentation (an auto-indenting editor's Enter, where it agrees with the model)."""
    if shown[0] != "\n":
        return shown[0]
    indented = shown[1:]
    return "\n" + indented[: len(indented) - len(indented.lstrip(" \t"))]


def _document(request: CompletionRequest | PrefillRequest) -> LfDocument:
    """The request's document and cursor as the core reads them: every line break a line feed (the prompt, the
    regions, the post-processing and the sessions' states all see LF; completions go back in the document's own)."""
    text = request.text if request.text is not None else request.prefix + (request.suffix or "")
    return LfDocument.of(text, _request_cursor(request))


def _request_cursor(request: CompletionRequest | PrefillRequest) -> int:
    return request.cursor if request.text is not None else len(request.prefix)
