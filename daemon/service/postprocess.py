"""Post-processing: how much of the model's text to show, decided from the text around the cursor.

Single line vs multi-line (auto: mid-line completes to the end of the line, an empty line or a block
opener gets a block), stop at the end of the block (indentation, and brackets in brace languages), drop
text the suffix already has, end before a NUL character, and never offer whitespace alone. `block_end`
also serves as an early stop rule during generation, so no tokens are spent past what will be shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ..context.syntax import Region

BLOCK_OPENERS = (":", "{", "(", "[", "=>", "->")
BRACE_LANGUAGES = {"javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp"}  # brackets delimit blocks
BRACKETS = {")": "(", "]": "[", "}": "{"}


@dataclass(frozen=True)
class CursorContext:
    line_before: str  # the cursor's line up to the cursor
    line_after: str  # the cursor's line after the cursor
    previous_line: str  # the nearest non-blank line above the cursor's line ("" if none)
    next_lines: tuple[str, ...]  # the first lines of the suffix after the cursor's line
    region: Region
    brace_language: bool  # brackets delimit blocks (C family, JS/TS, Go, Rust, Java)
    at_end: bool = False  # nothing but whitespace after the cursor (the end of the file)
    previous_head: str = ""  # the line the previous line's statement starts on: itself, or the line that opened the
    # brackets it closes (`def f(a,` of `         b):`)
    code: bool = True  # a programming language of the table (not Markdown, plain text or one nestling has no grammar for)

    @classmethod
    def from_text(cls, prefix: str, suffix: str, region: Region, brace_language: bool) -> "CursorContext":
        before_lines = prefix.split("\n")
        after_lines = suffix.split("\n")
        number = next((n for n in range(len(before_lines) - 2, -1, -1) if before_lines[n].strip()), None)
        previous = before_lines[number] if number is not None else ""
        return cls(before_lines[-1], after_lines[0], previous, tuple(after_lines[1:6]), region, brace_language,
                   not suffix.strip(), _head_of(before_lines, number) if number is not None else "")


def _head_of(lines: list[str], number: int) -> str:
    """The line that the statement ending on line `number` starts on: back while brackets closed are unopened (quotes
    are not looked into), at most 50 lines."""
    unopened, first = 0, number
    for first in range(number, max(-1, number - 50), -1):
        unopened -= _open_brackets(lines[first])
        if unopened <= 0:
            break
    return lines[first]


def _open_brackets(line: str) -> int:
    """How many brackets `line` opens and leaves open, less those it closes (quotes are not looked into)."""
    return sum(line.count(c) for c in "([{") - sum(line.count(c) for c in ")]}")


def cursor_context(prefix: str, suffix: str, region: Region, language) -> CursorContext:
    """The context of a cursor between `prefix` and `suffix` in a document of `language` (a Language, or None)."""
    context = CursorContext.from_text(prefix, suffix, region, bool(language and language.name in BRACE_LANGUAGES))
    return replace(context, code=language is not None)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def line_mode(requested: str, ctx: CursorContext) -> str:
    """'single' or 'multi' for a requested mode of 'single', 'multi' or 'auto'."""
    if requested in ("single", "multi"):
        return requested
    if ctx.line_after.strip() or ctx.region in (Region.COMMENT, Region.STRING):
        return "single"  # mid-line, or inside a comment/string: finish this line
    typed = ctx.line_before.strip()
    if not typed:
        return "multi"  # an empty line: the next statement(s) or a block body
    return "multi" if typed.endswith(BLOCK_OPENERS) else "single"


def block_end(text: str, ctx: CursorContext, mode: str) -> int | None:
    """Where to cut the model's text (an index into it), or None to keep all of it so far."""
    nul = text.find("\x00")
    if nul >= 0:  # never source code, and editors' JSON parsers refuse it (Emacs): the text ends there, or before
        cut = _line_or_block_end(text[:nul] + "\n", ctx, mode)  # the line the NUL ends is complete
        return nul if cut is None else min(cut, nul)
    cuts = [cut for cut in (_line_or_block_end(text, ctx, mode), _markdown_fence(text, ctx)) if cut is not None]
    return min(cuts) if cuts else None


MARKDOWN_FENCE = re.compile(r"^[ \t]*```", re.MULTILINE)
OPEN_STRINGS = ('"""', "'''", "`")  # quotes a fence line may lie inside: a docstring, a template literal


def _markdown_fence(text: str, ctx: CursorContext) -> int | None:
    """Where a line of the text that starts a Markdown fence (```) begins, less its line break: the default model
    (an instruct model) closes code it wrote at a file's end with one, and no language of the table has such a line
    outside a string. Kept: in a document of another language (Markdown's fences are its own), at a cursor in a
    comment or a string, and where the text before the line leaves a docstring or a template literal open."""
    if not ctx.code or ctx.region in (Region.COMMENT, Region.STRING):
        return None
    for found in MARKDOWN_FENCE.finditer(text):
        if found.start() == 0 and ctx.line_before.strip():  # (on the cursor's line: only where it starts the line)
            continue
        before = text[:found.start()]
        if any(before.count(quote) % 2 for quote in OPEN_STRINGS):
            return None
        return max(0, found.start() - 1)
    return None


def _line_or_block_end(text: str, ctx: CursorContext, mode: str) -> int | None:
    """block_end for text without a NUL: the end of the line (single) or of the block (multi)."""
    if mode == "single":
        start = len(text) - len(text.lstrip("\n")) if not ctx.line_before.strip() else 0
        newline = text.find("\n", start)
        return newline if newline >= 0 else None
    base = _indent(ctx.line_before) if not ctx.line_before.strip() else _indent(ctx.line_before) + 1
    if not ctx.line_before.strip() and ctx.previous_line.rstrip().endswith(BLOCK_OPENERS):
        base = max(base, _indent(ctx.previous_head or ctx.previous_line) + 1)  # the body of a block just opened (from
        # the line its header starts on)
    depth = 0
    offset = 0
    lines = text.split("\n")
    for number, line in enumerate(lines):
        # (a line's indentation is known once it has text: the last, unfinished line counts then too, unless it
        # starts with a closing bracket, which may close one the completion opened: decided once the line is complete)
        last = number == len(lines) - 1
        if number > 0 and line.strip() and _indent(line) < base and not (last and line.strip()[0] in BRACKETS):
            if not (ctx.brace_language and line.strip()[0] in BRACKETS and depth > 0):
                return offset - 1  # a complete line that leaves the block
        if base == 0 and depth == 0 and _starts_another_top_level_unit(lines, number):
            return len(text[:offset].rstrip(" \t\n"))  # at the top level: one definition or group of statements
        if ctx.brace_language:
            for index, char in enumerate(line):
                if char in "([{":
                    depth += 1
                elif char in BRACKETS:
                    depth -= 1
                    if depth < 0:  # closes a bracket opened before the cursor: the suffix has it
                        cut = offset + index
                        return len(text[:cut].rstrip(" \t\n")) if number > 0 else cut
        offset += len(line) + 1
    return None


def _starts_another_top_level_unit(lines: list[str], number: int) -> bool:
    """Whether line `number` (with text) starts at column 0 after a blank line that follows text: a blank line at
    the top level ends a unit (a definition, a group of imports or statements), as nothing dedents there."""
    line = lines[number]
    return (0 < number and bool(line.strip()) and _indent(line) == 0
            and line.strip()[0] not in BRACKETS and not lines[number - 1].strip()
            and any(l.strip() for l in lines[: number - 1]))


CLOSERS = set(")]}'\";:,")
TRAILING_COMMENT = re.compile(r"\s*((#|//).*)?")  # what may follow the rest of the line: a comment, or nothing


def _drop_overlap(text: str, ctx: CursorContext) -> str:
    """Remove a tail of `text` that the suffix already holds: the rest of the cursor's line (all of it, or
    a run of closing brackets/quotes from its start), or lines that repeat the suffix's next lines."""
    after = ctx.line_after.strip()
    if after:
        stripped = text.rstrip()
        for size in range(min(len(after), len(stripped)), 0, -1):
            head = after[:size]
            if stripped.endswith(head) and (size == len(after) or set(head) <= CLOSERS):
                return stripped[: len(stripped) - size]
        # the rest of the line's closers written again, then a comment: `f(3, ¦))` gave "4))  # Output: 12"
        end = stripped.rfind(after) if set(after) <= CLOSERS | {" "} else -1
        if end > 0 and TRAILING_COMMENT.fullmatch(stripped[end + len(after):]):
            return stripped[:end]
        return text
    following = [line.rstrip() for line in ctx.next_lines if line.strip()]
    lines = text.rstrip("\n").split("\n")
    if following:
        while len(lines) > 1 and _same_line(lines[-1].rstrip(), following[0]):
            lines.pop()
    return "\n".join(lines)


CONTINUATION_ENDS = ("\\", "+", "-", "*", "/", "%", "|", "&", "=", ".", "?", " and", " or", " not")  # an
# operator ends the line: the expression goes on in the next, hanging (not `i++` or `i--`, which end a statement)
CONTINUATION_STARTS = (".", "?", ":", "&&", "||", "<<", ">>", "+", "-", "*", "/", "|", "and ", "or ")  # a line that
# goes on with the expression above (a method chain, `<<` in C++, an operator first)
BRACELESS_BODY = re.compile(r"(^|[\s}])(else|do)$|^\s*(}\s*else\s+)?(if|for|while)\b.*\)$")  # C/JS/Java: the next line
COMMENT_AT_END = {True: re.compile(r"(^|\s)//[^'\"`]*$"), False: re.compile(r"(^|\s)#[^'\"]*$")}  # brace language or
# not: a comment that ends a line (or is all of it; no quote after its start)


def _same_line(line: str, other: str) -> bool:
    """Whether `line` repeats `other`: the same code, and for closing brackets alone the same indentation too (a
    block's `\t}` is not the function's `}` after it)."""
    if set(line.strip()) <= CLOSERS | {" "}:
        return line == other
    return line.strip() == other.strip()


def _without_extra_indent(text: str, ctx: CursorContext) -> str:
    """On a blank line's indentation (the editor's auto-indent) the model often writes more indentation: a level again
    (`    def __str__` after `    `, the method nested in the one above), the level a block would have if the line
    above opened one. Where that line opens no block at or below the cursor's indentation and no expression hangs
    from it, the first line's extra indentation goes; the lines after it keep theirs, unless they were all written
    deeper, in the first line's frame (a sibling at its level, a block's body deeper than it), where they move with
    it. Comments and strings keep what the model wrote. Measured on blank lines of the held-out files (BENCHMARKS.md,
    "Indentation on a blank line"): the first line's indentation was right in 80 of 96 before, 93 after."""
    indent, lines = ctx.line_before, text.split("\n")
    first = lines[0]
    extra = first[: len(first) - len(first.lstrip(" \t"))]
    if not (indent and not indent.strip() and not ctx.line_after.strip() and extra and first.strip()) or \
            ctx.region in (Region.COMMENT, Region.STRING):
        return text
    previous = COMMENT_AT_END[ctx.brace_language].sub("", ctx.previous_line.rstrip()).rstrip()
    opens = previous.endswith(BLOCK_OPENERS if ctx.brace_language else BLOCK_OPENERS + ("{",)) or \
        (ctx.brace_language and bool(BRACELESS_BODY.search(previous)))
    if opens and _indent(ctx.previous_head or previous) >= len(indent):
        return text  # a block opens above and the cursor is not in it yet: its body is deeper, as the model wrote
    if _hangs(previous, ctx.brace_language) or first.lstrip().startswith(CONTINUATION_STARTS):
        return text  # an expression goes on from the line above: a hanging indentation is the model's to choose
    later = [line for line in lines[1:] if line.strip()]
    depth = len(indent) + len(extra)  # where the model put its first line
    in_its_frame = bool(later) and all(_indent(line) >= depth for line in later) and not (
        first.rstrip().endswith(BLOCK_OPENERS) and _indent(later[0]) <= depth)  # (a body is deeper than its opener)
    return "\n".join([first[len(extra):]] + [line[len(extra):] if in_its_frame and line.startswith(extra) else line
                                             for line in lines[1:]])


def _hangs(line: str, brace_language: bool) -> bool:
    """Whether an expression goes on after `line`: it ends with an operator, or leaves a bracket open (a `{` that
    ends it opens a block in a brace language; a Python `{` opens a literal, which hangs)."""
    if line.endswith(CONTINUATION_ENDS) and not line.endswith(("++", "--")):
        return True
    if brace_language and line.endswith("{"):
        return False  # a block opens, whatever else the line leaves open (`it('x', () => {`, `.then((r) => {`)
    return _open_brackets(line) > 0


def settled_text(text: str) -> str:
    """`text` less a character still being written: where the tokens end inside one (byte tokens of a multi-byte
    character decode as U+FFFD until its last byte), the trailing U+FFFDs may yet become another character, or, at the
    end of a completion, be no character at all. (QA: streamed, one was sent as U+FFFD and never corrected; cut by
    max_tokens, one was offered, and accepting it wrote U+FFFD into the file.) A U+FFFD the model wrote whole at the end
    goes too: no code is the worse for it."""
    return text.rstrip("\ufffd")


def finalize(text: str, ctx: CursorContext, mode: str) -> str:
    """The text to offer: cut at the block end, without what the suffix has or a character left half written; '' for
    whitespace alone."""
    text = settled_text(text)
    cut = block_end(text, ctx, mode)
    if cut is not None:
        text = text[:cut]
    text = text.removesuffix("\r")  # (documents reach the core with line feeds; a CR the model wrote before one goes)
    text = _without_extra_indent(text, ctx)
    if mode == "multi":
        text = text.rstrip()
    text = _drop_overlap(text, ctx)
    return text if text.strip() else ""
