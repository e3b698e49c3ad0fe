"""Edge conversions between LSP positions/items and plain text offsets and strings."""

from __future__ import annotations

import json
import re

from lsprotocol import types

IDENTIFIER_TAIL = re.compile(r"[A-Za-z0-9_$]*$")


# LSP ends a line at \n, \r\n or \r only; str.splitlines also breaks at \v, \f, \x1c-\x1e, \x85, U+2028 and U+2029
LSP_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
CODECS = {"utf-8": ("utf-8", 1), "utf-16": ("utf-16-le", 2), "utf-32": ("utf-32-le", 4)}  # position encodings


def lsp_lines(text: str) -> list[str]:
    """The text's lines as LSP counts them, each with its line break (no empty line after a last break)."""
    return LSP_LINE.findall(text)


def _codec(encoding) -> tuple[str, int]:
    """(Python codec, bytes per code unit) of an LSP position encoding (a PositionEncodingKind or its value)."""
    return CODECS.get(getattr(encoding, "value", encoding), CODECS["utf-16"])


def _split_line(content: str, units: int, encoding) -> tuple[int, bool, int]:
    """(code points in `content` before its first `units` code units, rounded down to a character; whether that
    rounding was needed, i.e. the units end inside a character; the units in the whole line)."""
    codec, width = _codec(encoding)
    data = content.encode(codec, "surrogatepass")  # lone surrogates (JSON carries them) are one unit, as in UTF-16
    head = data[:units * width]
    try:
        before = head.decode(codec, "surrogatepass")
    except UnicodeDecodeError as exc:  # the units end inside a UTF-8 sequence
        before = head[:exc.start].decode(codec, "surrogatepass")
    if not content.startswith(before):  # the units end between the two halves of a UTF-16 surrogate pair
        before = before[:-1]
    return len(before), len(before.encode(codec, "surrogatepass")) != len(head), len(data) // width


def _line_start(lines: list[str], line: int) -> int:
    return sum(map(len, lines[:line]))


def offset_at(text: str, position: types.Position, encoding=types.PositionEncodingKind.Utf16) -> int:
    """The code-point offset of an LSP position in the text (lines as LSP counts them, characters in the position
    encoding's code units); ValueError (with a clear message) when the position is negative, lies past the end of
    its line or of the text, or inside a character (between the halves of a UTF-16 surrogate pair, say)."""
    if position.line < 0 or position.character < 0:
        raise ValueError(f"position {position.line}:{position.character} is negative")
    lines = lsp_lines(text)
    if position.line >= len(lines):
        at_last_empty_line = position.line == len(lines) and (not text or text.endswith(("\n", "\r")))
        if at_last_empty_line and position.character == 0:
            return len(text)
        if at_last_empty_line:
            raise ValueError(f"character {position.character} is past the end of line {position.line} (0 units)")
        count = line_count(text)
        raise ValueError(f"line {position.line} is past the end of the document ({count} line{'s' * (count != 1)}, "
                         f"0 to {count - 1})")
    content = lines[position.line].rstrip("\r\n")
    column, inside, units = _split_line(content, position.character, encoding)
    if position.character > units:
        raise ValueError(f"character {position.character} is past the end of line {position.line} ({units} units)")
    if inside:
        char = content[column]
        raise ValueError(f"character {position.character} of line {position.line} falls inside {char!r} "
                         f"(U+{ord(char):04X}, more than one {getattr(encoding, 'value', encoding)} code unit): a "
                         "position must be at a character boundary")
    return _line_start(lines, position.line) + column


def within_line(text: str, position: types.Position, encoding=types.PositionEncodingKind.Utf16) -> types.Position:
    """The position, its character taken back to its line's end where it lies past it ("If the character value is
    greater than the line length it defaults back to the line length", the LSP spec's Position). A line past the
    document's end is left as it is (offset_at says so)."""
    if position.line >= line_count(text):
        return position
    lines = lsp_lines(text)
    content = lines[position.line].rstrip("\r\n") if position.line < len(lines) else ""
    units = _split_line(content, 0, encoding)[2]
    if position.character <= units:
        return position
    return types.Position(line=position.line, character=units)


def cursor_offset(document, position: types.Position) -> int:
    """offset_at for a workspace document (its text and the position encoding agreed with the client)."""
    return offset_at(document.source, position, document.position_codec.encoding)


def apply_change(text: str, change_range: types.Range, new_text: str, encoding=types.PositionEncodingKind.Utf16) -> str:
    """The text after an incremental didChange: `new_text` in place of the range (lines as LSP counts them). A
    notification gets no error, so as editors do (VS Code's text model), a position past the end of its line or of the
    text is taken as that end, one inside a character as that character's start, and a range that ends before it
    starts as the range from its end to its start (`change_problem` says which of these need a log line)."""
    lines = lsp_lines(text)

    def offset(position: types.Position) -> int:
        if position.line >= len(lines):
            return len(text)
        content = lines[position.line].rstrip("\r\n")
        return _line_start(lines, position.line) + _split_line(content, position.character, encoding)[0]

    start, end = sorted((offset(change_range.start), offset(change_range.end)))
    return text[:start] + new_text + text[end:]


def change_problem(text: str, change_range: types.Range, encoding=types.PositionEncodingKind.Utf16) -> str | None:
    """What is wrong with an incremental didChange's range, for a log line: a line past the document's end, an end
    inside a character (a UTF-16 surrogate pair, a UTF-8 sequence), or a range that ends before it starts
    (apply_change still applies it, as editors would; the editor's text and the server's may differ from then on);
    None for a range that fits (a character past its line's end is its end, by the spec)."""
    last = line_count(text) - 1
    start, end = change_range.start, change_range.end
    past = [f"{name} line {p.line}" for name, p in (("its start's", start), ("its end's", end)) if p.line > last]
    problems = [f"{' and '.join(past)} lie{'s' if len(past) == 1 else ''} past the document's last line ({last}): "
                "taken as the document's end"] if past else []
    lines = lsp_lines(text)
    inside = [f"{name} ({p.line}:{p.character})" for name, p in (("its start", start), ("its end", end))
              if p.line < len(lines) and _split_line(lines[p.line].rstrip("\r\n"), p.character, encoding)[1]]
    if inside:
        problems.append(f"{' and '.join(inside)} fall{'s' if len(inside) == 1 else ''} inside a character: taken as "
                        "that character's start")

    def clamped(position: types.Position) -> tuple[int, int]:
        return (position.line, position.character) if position.line <= last else (last + 1, 0)

    if clamped(end) < clamped(start):
        problems.append(f"the range ends ({end.line}:{end.character}) before it starts ({start.line}:{start.character}):"
                        " applied from its end to its start")
    return "; ".join(problems) or None


def line_count(text: str) -> int:
    """The lines an editor shows for the text: the empty line after a last line break counts (an empty text: one)."""
    return len(lsp_lines(text)) + (not text or text.endswith(("\n", "\r")))


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
    first_line = (word + text).split("\n")[0].removesuffix("\r")  # (a CRLF document's completion)
    label = first_line if len(first_line) <= 48 else first_line[:47] + "…"
    return types.CompletionItem(
        label=label or "…", kind=types.CompletionItemKind.Snippet, detail="nestling",
        documentation=word + text,
        filter_text=first_line, sort_text="0", insert_text_format=types.InsertTextFormat.PlainText,
        text_edit=types.TextEdit(range=word_range, new_text=word + text))


JSON_SPACE = re.compile(r"[ \t\n\r]*")


def request_id(unparsable: str) -> int | str | None:
    """The id of a JSON-RPC request that does not parse (cut short, say), when its top-level members before the fault
    name one; None when they do not (as JSON-RPC answers then), or when they look like a response."""
    decoder, members, keys = json.JSONDecoder(), {}, set()
    at = JSON_SPACE.match(unparsable).end()
    if not unparsable.startswith("{", at):
        return None
    at += 1
    while True:  # "key": value pairs, until one does not parse
        try:
            key, at = decoder.raw_decode(unparsable, JSON_SPACE.match(unparsable, at).end())
            at = JSON_SPACE.match(unparsable, at).end()
            if not isinstance(key, str) or not unparsable.startswith(":", at):
                break
            keys.add(key)
            value, at = decoder.raw_decode(unparsable, JSON_SPACE.match(unparsable, at + 1).end())
        except ValueError:
            break
        members[key] = value
        at = JSON_SPACE.match(unparsable, at).end()
        if not unparsable.startswith(",", at):
            break
        at += 1
    found = members.get("id")
    if type(found) not in (int, str) or {"result", "error"} & keys:
        return None
    return found
