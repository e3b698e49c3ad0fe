"""Per-document sessions: the model state of the last prompt (for prefix reuse) and a spare one (a second guess at
the next prompt, prefilled ahead), the syntax tree, the prompt window and the recent completions; bounded in bytes
across documents, least recently used first out."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from ..context.syntax import SyntaxDocument
from ..speculative.sequence import SequenceState
from .postprocess import settled_text


RECENT_COMPLETIONS = 8  # completions remembered per document: a keystroke undone finds the one from before it
# characters kept on each side of a remembered cursor: more than a prompt's window holds (1,536 + 128 tokens), so an
# edit farther away, which the model does not see, does not count; a huge document is not copied 8 times
CONTEXT_CHARS = 16_384


@dataclass
class PastCompletion:
    """A completion in a document: where it was asked and what the model wrote there (possibly cut short by a
    newer request). While the user types into it, the rest of it is what the model is expected to write next."""

    prefix_end: str  # the last CONTEXT_CHARS characters before the cursor when it was asked
    prefix_length: int  # all the characters before it
    suffix_start: str  # the first CONTEXT_CHARS characters after it
    suffix_length: int
    text: str  # the model's output there, before post-processing

    @classmethod
    def at(cls, prefix: str, suffix: str, text: str) -> "PastCompletion":
        """A completion written at (prefix, suffix); a character it was cut inside (decoded as U+FFFD) is dropped."""
        return cls(prefix[-CONTEXT_CHARS:], len(prefix), suffix[:CONTEXT_CHARS], len(suffix), settled_text(text))

    def rest_after(self, prefix: str, suffix: str) -> str:
        """The output expected at (prefix, suffix): this text less what was typed of it since ("" when the text
        after the cursor changed, the text before it changed other than by typing, or what was typed differs); what
        was typed may also be the text as shown without the indentation the model added (postprocess.py)."""
        start = self.prefix_length - len(self.prefix_end)
        if (len(suffix) != self.suffix_length or not suffix.startswith(self.suffix_start)
                or len(prefix) < self.prefix_length or prefix[start : self.prefix_length] != self.prefix_end):
            return ""
        typed = prefix[self.prefix_length:]
        if self.text.startswith(typed):
            return self.text[len(typed):]
        shown = self.text.lstrip(" \t")  # as shown where post-processing took the indentation it added away
        return shown[len(typed):] if typed and shown.startswith(typed) else ""

    @property
    def place(self) -> tuple:
        return self.prefix_end, self.prefix_length, self.suffix_start, self.suffix_length


@dataclass
class Session:
    uri: str
    states: dict[str, SequenceState] = field(default_factory=dict)  # per decoding mode: where the next request starts
    # per decoding mode: a second guess's prefill ahead, swapped in for a request that shares more of it
    spare_states: dict[str, SequenceState] = field(default_factory=dict)
    syntax: SyntaxDocument | None = None  # the document's parse, updated incrementally
    language: str | None = None  # language table name the syntax was built for
    prefix_start: int | None = None  # the prompt window's start in the document (kept while typing)
    # the latest requests' outputs, newest last (draft hints while the user types into one, or undoes a keystroke)
    recent_completions: deque = field(default_factory=lambda: deque(maxlen=RECENT_COMPLETIONS))
    last_used: float = field(default_factory=time.monotonic)
    # committed prompt tokens after the last prefill ahead into states / spare_states, until the next request (0: none)
    ahead_end: int = 0
    spare_ahead_end: int = 0
    # which prefill ahead holds the completion accepted whole (1: the first, into states; 2: the spare; 0: none), and
    # whether the last request that found its prompt prefilled ahead had accepted a completion (then that is guessed
    # first next time: a user who accepts suggestions one after another gets the next one ready sooner)
    accept_guess: int = 0
    accept_first: bool = False

    def remember(self, completion: PastCompletion) -> None:
        """Keep `completion` as the newest, replacing one asked at the same place."""
        for old in [c for c in self.recent_completions if c.place == completion.place]:
            self.recent_completions.remove(old)
        self.recent_completions.append(completion)

    def expected_text(self, prefix: str, suffix: str) -> str:
        """What the model is expected to write at (prefix, suffix): the rest of the newest remembered completion the
        user has typed into since (or that was asked at this very place); "" if none."""
        return next((rest for c in reversed(self.recent_completions) if (rest := c.rest_after(prefix, suffix))), "")

    def take_closer_spare(self, mode: str, prompt: list[int]) -> bool:
        """Make the spare state the session's state (and the state the spare) if it shares more of `prompt`; returns
        whether it did."""
        state, spare = self.states.get(mode), self.spare_states.get(mode)
        if state is None or spare is None or spare.common_prefix(prompt) <= state.common_prefix(prompt):
            return False
        self.states[mode], self.spare_states[mode] = spare, state
        self.ahead_end, self.spare_ahead_end = self.spare_ahead_end, self.ahead_end
        return True

    def kv_bytes(self) -> int:
        return sum(state.kv_bytes() for states in (self.states, self.spare_states) for state in states.values())

    def held_bytes(self) -> int:
        """What keeping this session costs: its model state, and the document's text and parse."""
        return self.kv_bytes() + (self.syntax.held_bytes() if self.syntax is not None else 0)


class SessionStore:
    """Owned by the model worker thread; `snapshot()` is safe to read from elsewhere."""

    def __init__(self, limit_bytes: int):
        self.limit_bytes = limit_bytes
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self.snapshot = (0, 0)  # (bytes, documents) after the last request

    def get(self, uri: str) -> Session:
        session = self._sessions.pop(uri, None) or Session(uri)
        session.last_used = time.monotonic()
        self._sessions[uri] = session  # most recent last
        return session

    def drop(self, uri: str) -> None:
        self._sessions.pop(uri, None)

    def enforce_limit(self, keep: str | None = None) -> None:
        """Evict least recently used sessions until what they hold (model state, texts and parses) fits the limit."""
        total = sum(s.held_bytes() for s in self._sessions.values())
        for uri in list(self._sessions):
            if total <= self.limit_bytes:
                break
            if uri == keep:
                continue
            total -= self._sessions.pop(uri).held_bytes()
        self.snapshot = (total, len(self._sessions))

    def __len__(self) -> int:
        return len(self._sessions)
