"""Fill-in-the-middle prompts: the text around the cursor, cut at line boundaries to token budgets."""

from __future__ import annotations

from dataclasses import dataclass, replace

# A token rarely spans more than this many characters; bounds the text tokenized for a budget.
_CHARS_PER_TOKEN_BOUND = 16


@dataclass(frozen=True)
class FimBudget:
    """How much context around the cursor goes into the prompt."""

    prefix_tokens: int = 1536  # tokens of text before the cursor, at most
    suffix_tokens: int = 512  # tokens of text after the cursor, at most
    path_header: bool = False  # put the file's name first (<|file_sep|>name) where the model has the marker; off: it made
    # the 0.5B Instruct model answer with markdown (a document of one line at most gets it anyway: `_short_document`)

    def fitted(self, positions: int | None, room: int = 32) -> "FimBudget":
        """This budget, cut where it leaves a model of `positions` fewer than `room` of them to write in (a model of
        2,048 positions with a 4,000-token prefix budget): the suffix to a quarter at most, the prefix to the rest."""
        if not positions or self.prefix_tokens + self.suffix_tokens + room <= positions:
            return self
        suffix = min(self.suffix_tokens, max(0, (positions - room) // 4))
        return replace(self, prefix_tokens=max(1, positions - room - suffix), suffix_tokens=suffix)


@dataclass(frozen=True)
class FimPrompt:
    token_ids: list[int]  # the whole prompt
    prefix: str  # the text before the cursor that made it in
    suffix: str  # the text after the cursor that made it in
    prefix_start: int = 0  # where the kept prefix starts in the full prefix (a line start): pass it back as
    # `sticky_start` next time so the prompt keeps its beginning while the user types (prefix KV reuse)


@dataclass(frozen=True)
class LfDocument:
    """A document as the core reads it: every line break a line feed (the model writes different code after CRLF
    than after LF: `    def ¦` gave "def pop(self):" in a CRLF file, "pop(self):" in the same LF file)."""

    text: str  # the document, every line break (CRLF, a lone CR) a LF
    cursor: int  # the cursor in `text`
    # the document's most common line break ("\n", "\r\n" or "\r"): what a completion is given back with
    line_break: str
    # where a completion goes in the document as given: the cursor, or before a line break's CR where the cursor was
    # between its CR and its LF (QA: a completion there split the line break)
    raw_cursor: int

    @classmethod
    def of(cls, text: str, cursor: int) -> "LfDocument":
        if "\r" not in text:
            return cls(text, cursor, "\n", cursor)
        if 0 < cursor < len(text) and text[cursor - 1] == "\r" and text[cursor] == "\n":
            cursor -= 1  # between the CR and the LF of a line break: before it
        pairs = text.count("\r\n")
        counts = {"\n": text.count("\n") - pairs, "\r\n": pairs, "\r": text.count("\r") - pairs}
        line_break = max(counts, key=lambda k: (counts[k], k == "\n"))
        return cls(lf_only(text), cursor - text.count("\r\n", 0, cursor), line_break, cursor)

    def in_its_line_breaks(self, completion: str) -> str:
        """`completion` (written for `text`) with the document's own line breaks."""
        return completion if self.line_break == "\n" else completion.replace("\n", self.line_break)


def lf_only(text: str) -> str:
    """`text` with every line break (CRLF, a lone CR, as in old Mac files) a line feed."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def split_at(text: str, line: int, column: int) -> tuple[str, str]:
    """(prefix, suffix) of `text` (line feeds: `lf_only`) at 0-based `line` and `column` (in characters); ValueError if
    out of range."""
    lines = text.split("\n")
    if line < 0 or line >= len(lines):
        raise ValueError(f"line {line + 1} is outside the document (it has {len(lines)} "
                         f"line{'' if len(lines) == 1 else 's'}{', which start at 1' if line < 0 else ''})")
    if column < 0:
        raise ValueError(f"column {column + 1} is before the start of line {line + 1} (columns start at 1)")
    if column > len(lines[line]):
        raise ValueError(f"column {column + 1} is past the end of line {line + 1} (it has {len(lines[line])} "
                         f"character{'' if len(lines[line]) == 1 else 's'})")
    offset = sum(len(l) + 1 for l in lines[:line]) + column
    return text[:offset], text[offset:]


def _suffix_shown(prefix: str, suffix: str) -> str:
    """The suffix, but for a cursor inside the last line of a file without a final newline a line break, as if the
    file had one: with an empty suffix there the default model wrote the line's indentation again (at "\n    " it
    wrote "    return ...", 8 spaces where the line has 4; after "x = 1\n    " too). At a line start, where there is
    no indentation to repeat (HumanEval's prompts end so), the suffix stays empty: a line break there cost 0.07
    tau on HumanEval (2.64 -> 2.57, 24 prompts), whose prompts the head learned as they are."""
    if suffix or not prefix or prefix.endswith("\n"):
        return suffix
    return "\n"


def _short_document(prefix: str, suffix: str) -> bool:
    """A document of one line at most (blank lines aside): too little for the model to tell its language. With only the
    FIM markers the default model wrote Angular TypeScript in an empty .go, .py, .rs, .java, .c or .js file, and after
    a word typed mostly another language (`p` in main.go: Java; `import` in app.py: TypeScript; `#` in util.c: a shell
    script); with the file's name first, each empty file its own language and 7 of 11 typed words a right
    continuation, against 3 (BENCHMARKS.md, "The file's name in a short document's prompt"). From a second line on
    (`package main\n\nfu`) the name stays out: there it cost a right answer (' func main()' after `fu`)."""
    return "\n" not in (prefix + suffix).strip()


def _encode(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"] if text else []


def _keep_tail(tokenizer, text: str, budget: int) -> str:
    """The longest tail of `text` that fits in `budget` tokens, starting at a line start when it can."""
    if budget <= 0 or not text:
        return ""
    window = text[-budget * _CHARS_PER_TOKEN_BOUND :]
    ids = _encode(tokenizer, window)
    if len(ids) <= budget and len(window) == len(text):
        return text
    start = len(window) - len(tokenizer.decode(ids[-budget:])) if len(ids) > budget else 0
    if start > 0 and window[start - 1] == "\n":  # the cut fell on a line start: keep that line
        return window[start:]
    newline = window.find("\n", start)
    if newline < 0 or (len(window) - newline - 1 < (len(window) - start) // 2 and _in_a_long_line(window, start)):
        return _fitted_tail(tokenizer, window[start:], budget)  # (QA: after a 30,000-character line, the next line
        # start kept nothing before the cursor's line; a cut in the long line keeps the lines after it whole)
    return window[newline + 1 :]


def _fitted_tail(tokenizer, text: str, budget: int) -> str:
    """`text` less the fewest leading characters that bring it within `budget` tokens: a cut inside a line can start
    inside a character (the budget's tokens decode to U+FFFD there) or tokenize other than inside the whole, a few
    tokens over (review)."""
    while text and (excess := len(_encode(tokenizer, text)) - budget) > 0:
        text = text[excess:]
    return text


LONG_LINE_CHARS = 256  # a line at least this long (data, minified code) may be cut in its middle to fit a budget


def _in_a_long_line(text: str, at: int) -> bool:
    """Whether position `at` of `text` is inside a line of at least LONG_LINE_CHARS characters."""
    end = text.find("\n", at)
    return (len(text) if end < 0 else end) - (text.rfind("\n", 0, at) + 1) >= LONG_LINE_CHARS


def _keep_head(tokenizer, text: str, budget: int) -> str:
    """The longest head of `text` that fits in `budget` tokens, ending at a line end when it can."""
    if budget <= 0 or not text:
        return ""
    window = text[: budget * _CHARS_PER_TOKEN_BOUND]
    ids = _encode(tokenizer, window)
    if len(ids) <= budget and len(window) == len(text):
        return text
    end = len(tokenizer.decode(ids[:budget])) if len(ids) > budget else len(window)
    newline = window.rfind("\n", 0, end)
    return window[: newline + 1] if newline >= 0 else window[:end]


def build_fim_prompt(
    tokenizer,
    fim_tokens: tuple[str, str, str] | None,
    prefix: str,
    suffix: str,
    path: str | None = None,  # the file's name (`languages.file_name_hint`)
    budget: FimBudget = FimBudget(),
    sticky_start: int | None = None,
) -> FimPrompt:
    """The FIM prompt for a cursor between `prefix` and `suffix` (plain prefix completion without FIM tokens).

    With `sticky_start` (the prefix_start of the previous prompt for this document), the prefix keeps
    starting there while it still fits the budget; a new start leaves a quarter of the budget as slack,
    so typing moves it only now and then."""
    kept_prefix = _sticky_tail(tokenizer, prefix, budget.prefix_tokens, sticky_start)
    if kept_prefix is None:
        kept_prefix = _keep_tail(tokenizer, prefix, budget.prefix_tokens * 3 // 4 if sticky_start is not None
                                 else budget.prefix_tokens)
    kept_suffix = _keep_head(tokenizer, suffix, budget.suffix_tokens)
    prefix_start = len(prefix) - len(kept_prefix)
    if fim_tokens is None:
        return FimPrompt(token_ids=_encode(tokenizer, kept_prefix), prefix=kept_prefix, suffix="",
                         prefix_start=prefix_start)
    pre, suf, mid = (tokenizer.convert_tokens_to_ids(t) for t in fim_tokens)
    ids: list[int] = []
    if path and (budget.path_header or _short_document(prefix, suffix)):
        file_sep = tokenizer.convert_tokens_to_ids("<|file_sep|>")
        if file_sep is not None and file_sep != tokenizer.unk_token_id:
            ids += [file_sep] + _encode(tokenizer, path + "\n")
    ids += [pre] + _encode(tokenizer, kept_prefix) + [suf] + _encode(tokenizer, _suffix_shown(kept_prefix, kept_suffix))
    ids += [mid]
    return FimPrompt(token_ids=ids, prefix=kept_prefix, suffix=kept_suffix, prefix_start=prefix_start)


def _sticky_tail(tokenizer, prefix: str, budget: int, start: int | None) -> str | None:
    """prefix[start:] if `start` is still a line start inside `prefix` (or inside a long line, where _keep_tail cuts)
    and the tail fits the budget."""
    if start is None or not 0 <= start <= len(prefix):
        return None
    if start > 0 and prefix[start - 1] != "\n" and not _in_a_long_line(prefix, start):
        return None
    tail = prefix[start:]
    if len(tail) > budget * _CHARS_PER_TOKEN_BOUND or len(_encode(tokenizer, tail)) > budget:
        return None
    return tail
