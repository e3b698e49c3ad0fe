"""The syntax region at the cursor, from a tree-sitter parse kept up to date incrementally.

A document is parsed once, then each edit is applied with `Tree.edit` and a reparse that reuses the old
tree. The region comes from the language's `regions.scm` query run over a tiny byte range around the
cursor: the innermost captured node containing the cursor names it (the smallest, then the deepest);
for captures of the same node, the pattern written first in the query file wins (so the files order specific patterns before general ones).
Where no capture holds the cursor because the code there does not parse yet (`return ¦`, `def ¦`), the region is the one it
has once a name is typed at the cursor, then the brackets the line leaves open, then a line tail of the language
(`def x():`, from languages.toml). Each is a reparse of the top-level constructs around the line alone (~0.1-1 ms), or
of a copy of the whole tree where those are a large share of it (a Java class) or may be pieces of a larger construct
the line broke apart (`_base_for`): with an
unfinished line in it, a reparse of the whole of an 8,000-line file took ~5 ms, up to ~20 ms where error recovery
ran. The tails share a 2 ms budget, and the name and closers have 25 ms. Where a capture does hold an
unfinished line, it is the one the line's error landed in (`    def ¦` between two methods: the class body); there the
typed lines are tried too, all within the budget, and the first that parses (with the next line of code) gives the
region, else the capture's stands. Unknown languages, missing grammars and parse failures give the neutral region,
never an exception.
"""

from __future__ import annotations

import logging
import sys
import time
from enum import Enum

from .languages import LanguageSpec, load_grammar

log = logging.getLogger(__name__)


class Region(str, Enum):
    BOILERPLATE = "boilerplate"  # imports, signatures, scaffolding, literals, closing brackets
    LOGIC = "logic"  # conditions, expressions and statements inside bodies
    COMMENT = "comment"  # comments and docstrings
    STRING = "string"  # inside a string literal
    NEUTRAL = "neutral"  # unknown language, top level, or no capture




PLACEHOLDER = "x"  # a name, as if typed at a cursor where the code does not parse yet (a valid identifier everywhere)
NAMED_REPARSES_BUDGET_S = 0.025  # the reparses with a name typed (and the line's closers): a bound for the worst case
# (a bracket the line closes had left the rest of a 7,000-line file in error recovery: 50-110 ms a lookup)
TYPED_REPARSES_BUDGET_S = 0.002  # the reparses with a line tail typed, together; past it the region found so far stands
HURRIED_SKIPS = 8  # after typed lines ran out of budget where a capture held the line: lookups without them
WINDOW_SHARE = 0.25  # the typed lines are parsed in the top-level constructs around the line alone where those hold
# under this share of the file (a fresh parse of a few constructs, ~0.1 ms; an incremental reparse of the whole file
# with an unfinished line in it took ~5 ms in 8,000 lines of Python), else in the whole file
ATTACHED_ABOVE = 4  # top-level constructs right above the line's (no blank line between) the window takes in
PARSE_BYTES_PER_NODE = 128  # a parse tree's memory per node, measured: 57 MB for a 2.3M-character file of CPython's
# standard library (414,564 nodes), 2.3M of it its text (QA: a 4M-character document held ~150 MB no limit counted)
READ_CHUNK = 1 << 16  # bytes handed to tree-sitter per read when a reparse can be cancelled


class SyntaxDocument:
    """One document's text and parse tree."""

    def __init__(self, text: str, language: LanguageSpec | None):
        self.language = language
        self.text = text
        self._bytes = text.encode("utf-8")
        self._parser = self._query = self._tree = None
        self._hurried_skips = 0  # lookups left before typed lines are tried again for a line a capture holds
        if language is not None:
            try:
                from tree_sitter import Parser

                grammar, self._query = load_grammar(language)
                self._parser = Parser(grammar)
                self._tree = self._parser.parse(self._bytes)
            except Exception as exc:  # a missing grammar package or a broken query: neutral regions
                log.warning("no syntax regions for %s: %s", language.name, exc)
                self._parser = self._query = self._tree = None

    def held_bytes(self) -> int:
        """About how much memory the document holds: its text (as str and as UTF-8) and its parse tree."""
        nodes = self._tree.root_node.descendant_count if self._tree is not None else 0  # (stored in the tree: O(1))
        return sys.getsizeof(self.text) + len(self._bytes) + nodes * PARSE_BYTES_PER_NODE

    def byte_offset(self, char_offset: int) -> int:
        return len(self.text[:char_offset].encode("utf-8"))

    def edit(self, start: int, end: int, new_text: str) -> None:
        """Replace characters [start, end) with `new_text` and reparse incrementally."""
        if not 0 <= start <= end <= len(self.text):
            raise ValueError(f"edit range {start}..{end} is outside the document (length {len(self.text)})")
        start_byte, old_end_byte = self.byte_offset(start), self.byte_offset(end)
        start_point, old_end_point = _point(self._bytes, start_byte), _point(self._bytes, old_end_byte)
        self.text = self.text[:start] + new_text + self.text[end:]
        self._bytes = self._bytes[:start_byte] + new_text.encode("utf-8") + self._bytes[old_end_byte:]
        if self._tree is None:
            return
        new_end_byte = start_byte + len(new_text.encode("utf-8"))
        self._tree.edit(start_byte=start_byte, old_end_byte=old_end_byte, new_end_byte=new_end_byte,
                        start_point=start_point, old_end_point=old_end_point, new_end_point=_point(self._bytes, new_end_byte))
        self._tree = self._parser.parse(self._bytes, self._tree)

    def replace(self, text: str) -> None:
        """Replace the whole text, as one edit spanning what changed (common prefix and suffix kept)."""
        old = self.text
        prefix = 0
        limit = min(len(old), len(text))
        while prefix < limit and old[prefix] == text[prefix]:
            prefix += 1
        suffix = 0
        while suffix < limit - prefix and old[len(old) - 1 - suffix] == text[len(text) - 1 - suffix]:
            suffix += 1
        self.edit(prefix, len(old) - suffix, text[prefix : len(text) - suffix])

    def sexp(self) -> str:
        return str(self._tree.root_node) if self._tree is not None else ""

    def region_at(self, char_offset: int) -> Region:
        """The region at a cursor before character `char_offset`."""
        if self._tree is None or not 0 <= char_offset <= len(self.text):
            return Region.NEUTRAL
        try:
            cursor = self.byte_offset(char_offset)
            region = self._region_at_byte(cursor)
            if region is Region.NEUTRAL:
                region = self._region_on_indented_blank_line(cursor)
            if region is Region.NEUTRAL:
                return self._region_as_if_typed(cursor)
            if not self._line_parses(cursor) and self._hurried_turn():
                # the capture holding an unfinished line is the one its error landed in (`    def ¦` between two
                # methods: the class body, logic): the line as if typed says better, when that fits the budget
                typed = self._region_as_if_typed(cursor, hurried=True)
                region = region if typed is Region.NEUTRAL else typed
            return region
        except Exception as exc:
            log.warning("region lookup failed: %s", exc)
            return Region.NEUTRAL

    def _region_on_indented_blank_line(self, cursor: int) -> Region:
        """An indented cursor on a blank line lies past the end of the block above it (tree-sitter ends a
        Python body at its last statement): take the innermost capture around the code just before that
        opens on a line indented less than the cursor, i.e. the construct whose body the new line is in."""
        line_start = self._bytes.rfind(b"\n", 0, cursor) + 1
        line_end = self._bytes.find(b"\n", cursor)
        line = self._bytes[line_start: line_end if line_end >= 0 else len(self._bytes)]
        if cursor == line_start or line.strip(b" \t\r"):
            return Region.NEUTRAL
        before = len(self._bytes[:line_start].rstrip())
        column = cursor - line_start
        return self._region_at_byte(before, lambda node: self._indent_of_line_at(node.start_byte) < column) \
            if before else Region.NEUTRAL

    def _hurried_turn(self) -> bool:
        """Whether to try the typed lines for a line a capture holds: not for the next HURRIED_SKIPS lookups after
        such a try ran out of budget (in a long file the reparses rarely fit in it: ~2 ms a keystroke for nothing)."""
        if self._hurried_skips > 0:
            self._hurried_skips -= 1
            return False
        return True

    def _line_parses(self, cursor: int) -> bool:
        """Whether the cursor's line up to the cursor holds no syntax error, nor the innermost construct around the
        cursor that starts on the line (`async def ¦`'s error lies in the next line, which it took for its name)."""
        line_start = self._bytes.rfind(b"\n", 0, cursor) + 1
        return _line_fits(self._tree, line_start, cursor, self._bytes)

    def _region_as_if_typed(self, cursor: int, hurried: bool = False) -> Region:
        """Right after a keyword, an operator or a comma (`return ¦`, `x = ¦`, `def ¦`, `f(a, ¦`) the statement
        does not parse yet and no capture holds the cursor: take the region it has once a name is typed there, then
        the brackets the line leaves open, then one of the language's line tails (`def x():`): the first of these
        lines that parses, else the first that gives a region (each a parse of the window around the line, or a
        reparse of a copy of the tree). The tails' parses share TYPED_REPARSES_BUDGET_S; past it the region found so
        far stands. `hurried` (the cursor has a region already, from a capture that may not say what the line is): the
        budget covers every parse, and only a line that parses gives a region (else neutral); so on a stalled CPU the
        capture's region can stand where an idle one finds the typed line's (a region shapes the draft tree, never the
        output)."""
        line_start = self._bytes.rfind(b"\n", 0, cursor) + 1
        line = self._bytes[line_start:cursor]
        if not line.strip():
            return Region.NEUTRAL
        name, closers = PLACEHOLDER.encode(), _closers(line)
        typed = [name] + ([name + closers] if closers else [])
        tails = [name + closers + tail.encode() for tail in self.language.line_tails]
        fallback = Region.NEUTRAL
        deadline = time.perf_counter() + (TYPED_REPARSES_BUDGET_S if hurried else NAMED_REPARSES_BUDGET_S)
        base = self._base_for(line_start, cursor, deadline)  # (its tree, its bytes, where they start in the text)
        at, line_at = cursor - base[2], line_start - base[2]  # the cursor and its line's start in those bytes
        for number, text in enumerate(typed + tails):
            if number == len(typed) and not hurried:  # (the name and closers have a budget of their own)
                deadline = time.perf_counter() + TYPED_REPARSES_BUDGET_S
            tree, typed_bytes = self._typed_tree(base, at, text, deadline)
            if tree is None:
                if hurried:
                    self._hurried_skips = HURRIED_SKIPS
                break
            region = self._region_at_byte(at + len(name), tree=tree, size=len(typed_bytes))
            if _line_fits(tree, line_at, at + len(text), typed_bytes):
                return region
            if fallback is Region.NEUTRAL and not hurried:
                fallback = region
        return fallback

    def _base_for(self, line_start: int, cursor: int, deadline: float) -> tuple:
        """(tree, bytes, start): what the typed lines are parsed from. The document's top-level constructs from the one
        holding the cursor's line to the one holding its next line of code, with those right above it (no blank line
        between: a Rust attribute, a doc comment), parsed alone, with the document's bytes from `start`; or the
        document's own tree where those are over WINDOW_SHARE of the text (a Java file's one class), or may be pieces
        of a larger construct: where the file's root is an error, or an error among them starts before the line (a
        JavaScript class whose method's line is unfinished: its members end up loose). The tree is None when the parse
        ran past `deadline`."""
        root = self._tree.root_node
        whole = (self._tree, self._bytes, 0)
        if root.child_count == 0 or root.is_error:
            return whole
        first = root.first_child_for_byte(line_start) or root.child(root.child_count - 1)
        last, end = first, _next_code_line_end(self._bytes, cursor)
        while last.end_byte < end and last.next_sibling is not None:
            last = last.next_sibling
        for _ in range(ATTACHED_ABOVE):
            above = first.prev_sibling
            if above is None or above.end_point[0] + 1 < first.start_point[0]:
                break
            first = above
        node = first
        while node is not None and node.start_byte <= last.start_byte:
            if node.is_error and node.start_byte < line_start:
                return whole
            node = node.next_sibling
        start = self._bytes.rfind(b"\n", 0, min(first.start_byte, line_start)) + 1
        stop = max(last.end_byte, end)
        if stop - start > WINDOW_SHARE * len(self._bytes):
            return whole
        window = self._bytes[start:stop]
        return self._parse(window, None, deadline), window, start

    def _typed_tree(self, base: tuple, at: int, text: bytes, deadline: float):
        """(the tree, its bytes): the base's bytes with `text` inserted at byte `at`, reparsed from a copy of the base's
        tree (the document keeps its own); the tree is None when the parse runs past `deadline` (error recovery took
        ~20 ms where a Rust line fitted nowhere in a long file)."""
        base_tree, base_bytes, _ = base
        typed_bytes = base_bytes[:at] + text + base_bytes[at:]
        if base_tree is None:
            return None, typed_bytes
        row, column = _point(base_bytes, at)
        tree = base_tree.copy()
        tree.edit(start_byte=at, old_end_byte=at, new_end_byte=at + len(text), start_point=(row, column),
                  old_end_point=(row, column), new_end_point=(row, column + len(text)))
        return self._parse(typed_bytes, tree, deadline), typed_bytes

    def _parse(self, text: bytes, old_tree, deadline: float):
        """The tree of `text` (reusing `old_tree`, edited to match, if any), or None past `deadline`."""
        if time.perf_counter() > deadline:  # (a short parse can end before its first progress check)
            return None
        try:
            return self._parser.parse(lambda byte, _position: text[byte: byte + READ_CHUNK], *([old_tree] if old_tree else []),
                                      progress_callback=lambda *_: time.perf_counter() > deadline)
        except ValueError:  # cancelled: the parser would resume this parse next time unless reset
            self._parser.reset()
            return None

    def _indent_of_line_at(self, byte: int) -> int:
        start = self._bytes.rfind(b"\n", 0, byte) + 1
        line = self._bytes[start:byte]
        return len(line) - len(line.lstrip(b" \t"))

    def _region_at_byte(self, cursor: int, admit=lambda node: True, tree=None, size: int | None = None) -> Region:
        """The region at byte `cursor` of the document's tree (or of `tree`, over text of `size` bytes)."""
        from tree_sitter import QueryCursor

        query_cursor = QueryCursor(self._query)
        query_cursor.set_byte_range(max(0, cursor - 1), min(len(self._bytes) if size is None else size, cursor + 1))
        best = None
        for pattern, captures in query_cursor.matches((tree or self._tree).root_node):
            for name, nodes in captures.items():
                for node in nodes:
                    # a cursor right after a closing quote is outside the string; elsewhere ends count
                    inside = node.start_byte < cursor < node.end_byte if name == "string" else \
                        node.start_byte <= cursor <= node.end_byte
                    key = (node.end_byte - node.start_byte, -_depth(node), pattern)
                    if inside and (best is None or key < best[0]) and admit(node):
                        best = (key, name)
        return Region(best[1]) if best else Region.NEUTRAL


def _point(text: bytes, byte_offset: int) -> tuple[int, int]:
    """(row, column in bytes) of byte `byte_offset` of `text`, as tree-sitter counts points."""
    row = text.count(b"\n", 0, byte_offset)
    return row, byte_offset - (text.rfind(b"\n", 0, byte_offset) + 1)


def _closers(line: bytes) -> bytes:
    """The closing brackets of those `line` leaves open, innermost first (quotes are not looked into)."""
    pairs = {ord("("): b")", ord("["): b"]", ord("{"): b"}"}
    open_ = []
    for byte in line:
        if byte in pairs:
            open_.append(pairs[byte])
        elif open_ and bytes([byte]) == open_[-1]:
            open_.pop()
    return b"".join(reversed(open_))


def _parses_between(tree, start: int, end: int, text: bytes) -> bool:
    """Whether no syntax error (an ERROR node or a MISSING token) overlaps bytes [start, end] of `tree` (over `text`),
    a block the file leaves open at its end aside: the closing bracket missing there is not the line's."""
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.is_missing and node.type in ("}", ")", "]") and node.start_byte >= end and \
                not text[node.start_byte:].strip():
            continue
        if node.is_error or node.is_missing:
            return False
        if node.has_error:
            stack.extend(child for child in node.children if child.start_byte <= end and child.end_byte >= start)
    return True


def _line_fits(tree, line_start: int, end: int, text: bytes) -> bool:
    """Whether the line from byte `line_start` to `end` parses, and the next line with code still does: a line that
    does not fit may take the next one in (Java `public x` took `int b() {}` for its name, Python `async def ¦` the
    next method's `def`)."""
    return _parses_between(tree, line_start, _next_code_line_end(text, end), text)


def _next_code_line_end(text: bytes, end: int) -> int:
    """The end of the first line with code after the line of byte `end` (the text's end if none)."""
    line_end = text.find(b"\n", end)
    while line_end >= 0:
        next_end = text.find(b"\n", line_end + 1)
        next_end = len(text) if next_end < 0 else next_end
        if text[line_end + 1: next_end].strip():
            return next_end
        line_end = next_end if next_end < len(text) else -1
    return len(text)


def _depth(node) -> int:
    depth = 0
    while node.parent is not None:
        node = node.parent
        depth += 1
    return depth
