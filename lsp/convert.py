"""Edge conversions between LSP positions/items and plain text offsets and strings."""

from __future__ import annotations

import re

from lsprotocol import types

IDENTIFIER_TAIL = re.compile(r"[A-Za-z0-9_$]*$")


def cursor_offset(document, position: types.Position) -> int:
    """The code-point offset of an LSP position in the document; ValueError (with a clear message) when the
    position lies past the end of its line or of the document."""
    source = document.source
    lines = source.splitlines(keepends=True)
    if position.line < 0 or position.character < 0:
        raise ValueError(f"position {position.line}:{position.character} is negative")
    if position.line >= len(lines):
        at_last_empty_line = position.line == len(lines) and (not source or source.endswith(("\n", "\r")))
        if at_last_empty_line and position.character == 0:
            return len(source)
        raise ValueError(f"line {position.line} is past the end of the document ({len(lines)} lines)")
    line_text = lines[position.line].rstrip("\r\n")
    units = document.position_codec.client_num_units(line_text)
    if position.character > units:
        raise ValueError(f"character {position.character} is past the end of line {position.line} ({units} units)")
    return document.offset_at_position(position)


def encodable(text: str) -> str:
    """The text with each lone UTF-16 surrogate (JSON allows them; UTF-8 has none) as '?': one character for one,
    so every offset stays where it was."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def apply_selected(source: str, start: int, end: int, selected_text: str) -> tuple[str, int]:
    """The document as if the suggest widget's selected item were accepted, and the cursor after it."""
    return source[:start] + selected_text + source[end:], start + len(selected_text)


def inline_list(texts: list[str], prefix_text: str, replace: types.Range) -> types.InlineCompletionList:
    """Inline items over `replace`: the selected completion's (single-line) range, which each item's text
    extends, or the empty range at the cursor. The range is optional in the spec, but lsp-mode 10 fails on
    items without one."""
    return types.InlineCompletionList(items=[types.InlineCompletionItem(insert_text=prefix_text + text, range=replace)
                                             for text in texts])


def word_before(line_before_cursor: str) -> str:
    return IDENTIFIER_TAIL.search(line_before_cursor).group(0)


def completion_item(text: str, word: str, word_range: types.Range) -> types.CompletionItem:
    """One completion-menu item carrying the whole completion (for editors without inline completion)."""
    first_line = (word + text).split("\n")[0]
    label = first_line if len(first_line) <= 48 else first_line[:47] + "…"
    return types.CompletionItem(
        label=label or "…", kind=types.CompletionItemKind.Snippet, detail="nestling",
        documentation=word + text,
        filter_text=first_line, sort_text="0", insert_text_format=types.InsertTextFormat.PlainText,
        text_edit=types.TextEdit(range=word_range, new_text=word + text))
