"""Edge conversions of the language server (lsp/convert.py)."""

import pytest
from lsprotocol import types
from pygls.workspace import PositionCodec, TextDocument

from nestling.lsp.convert import (apply_change, change_problem, cursor_offset, encodable, line_count, lsp_lines,
                                  offset_at, request_id)


def test_lone_surrogates_become_one_character_each_and_valid_text_is_kept_as_it_is():
    text = "x = 'caf\u00e9 \U0001f600'\n"
    assert encodable(text) is text
    broken = "a = '\ud800'\nb = 1\n"  # JSON may carry a lone surrogate; UTF-8 (protobuf, the tokenizer) cannot
    fixed = encodable(broken)
    assert fixed == "a = '?'\nb = 1\n" and len(fixed) == len(broken)
    fixed.encode("utf-8")


# Characters str.splitlines (and so pygls's TextDocument) breaks lines at, which LSP does not: only \n, \r\n and \r end
# an LSP line.
NOT_LSP_BREAKS = ["\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("char", NOT_LSP_BREAKS)
def test_the_cursor_lands_on_the_lsp_line_whatever_other_line_breaks_the_text_holds(char):
    text = f"x = 1  # {char} page\ndef square(v):\n    return "
    position = types.Position(line=2, character=11)  # the end of "    return "
    assert cursor_offset(TextDocument("file:///x.py", text), position) == len(text)
    assert cursor_offset(TextDocument("file:///x.py", text), types.Position(line=1, character=11)) == \
        text.index("v):")
    with pytest.raises(ValueError, match="past the end of the document \\(3 lines, 0 to 2\\)"):
        offset_at(text, types.Position(line=3, character=0))
    assert offset_at("x = 1\r\n", types.Position(line=1, character=0)) == 7  # the empty last line
    with pytest.raises(ValueError, match="line 2 is past the end of the document \\(2 lines, 0 to 1\\)"):
        offset_at("x = 1\r\n", types.Position(line=2, character=0))  # (it said "1 lines")
    with pytest.raises(ValueError, match="character 3 is past the end of line 1 \\(0 units\\)"):
        offset_at("x = 1\r\n", types.Position(line=1, character=3))  # (it said the line was past the document)
    assert lsp_lines(f"a{char}b\nc\r\nd\re") == [f"a{char}b\n", "c\r\n", "d\r", "e"]


def test_a_character_past_its_lines_end_is_taken_back_to_it_and_a_line_past_the_document_is_not():
    from nestling.lsp.convert import within_line

    utf8, utf16 = types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf16
    text = "s = 'é'\r\nx\n"
    assert within_line(text, types.Position(0, 40), utf16) == types.Position(0, 7)
    assert within_line(text, types.Position(0, 40), utf8) == types.Position(0, 8)  # é: two UTF-8 units
    assert within_line(text, types.Position(1, 3), utf16) == types.Position(1, 1)
    assert within_line(text, types.Position(2, 5), utf16) == types.Position(2, 0)  # the empty last line
    for kept in (types.Position(0, 3), types.Position(3, 5)):
        assert within_line(text, kept, utf16) == kept
    assert within_line("x", types.Position(1, 2), utf16) == types.Position(1, 2)  # no line 1: offset_at says so


def test_a_position_inside_a_character_is_refused_and_one_at_its_boundaries_is_not():
    text = "s = '\U0001f600' + 'é'\n"  # the emoji: 2 UTF-16 units, 4 UTF-8 bytes; é: 2 UTF-8 bytes
    utf16 = types.PositionEncodingKind.Utf16
    assert offset_at(text, types.Position(0, 5), utf16) == 5 and offset_at(text, types.Position(0, 7), utf16) == 6
    with pytest.raises(ValueError, match="character 6 of line 0 falls inside .*U\\+1F600.*character boundary"):
        offset_at(text, types.Position(0, 6), utf16)
    with pytest.raises(ValueError, match="character boundary"):  # the pygls document, as the server has it
        cursor_offset(TextDocument("file:///x.py", text, position_codec=PositionCodec(utf16)), types.Position(0, 6))
    utf8 = types.PositionEncodingKind.Utf8
    for inside in (6, 7, 8, 15):
        with pytest.raises(ValueError, match="character boundary"):
            offset_at(text, types.Position(0, inside), utf8)
    assert offset_at(text, types.Position(0, 9), utf8) == 6 and offset_at(text, types.Position(0, 16), utf8) == 12
    assert offset_at(text, types.Position(0, 6), types.PositionEncodingKind.Utf32) == 6
    lone = "a = '\ud800' + b\n"  # a lone surrogate (JSON carries them) is one unit
    assert offset_at(lone, types.Position(0, 7)) == 7


def test_incremental_edits_follow_lsp_lines():
    for char in NOT_LSP_BREAKS:
        text = f"x = 1  # {char} page\ndef square(v):\n    return "
        edit = types.Range(start=types.Position(2, 11), end=types.Position(2, 11))
        assert apply_change(text, edit, "v * v") == text + "v * v"
        renamed = apply_change(text, types.Range(start=types.Position(1, 11), end=types.Position(1, 12)), "value")
        assert renamed == text.replace("(v)", "(value)")
        across = types.Range(start=types.Position(0, 10), end=types.Position(1, 3))  # from after the char to "def"
        assert apply_change(text, across, "") == f"x = 1  # {char} square(v):\n    return "
    text = "a\r\nb\rc😀d"
    assert apply_change(text, types.Range(start=types.Position(2, 1), end=types.Position(2, 3)), "") == "a\r\nb\rcd"
    # a notification gets no error: past a line's or the text's end is that end
    assert apply_change(text, types.Range(start=types.Position(0, 9), end=types.Position(0, 9)), "!") == \
        "a!\r\nb\rc😀d"
    past_the_end = types.Range(start=types.Position(50, 0), end=types.Position(60, 3))
    assert apply_change(text, past_the_end, "XYZ") == text + "XYZ"
    reversed_range = types.Range(start=types.Position(2, 3), end=types.Position(0, 1))  # as VS Code: end to start
    assert apply_change(text, reversed_range, "-") == "a-d"  # (it inserted at the start, deleting nothing)


def test_an_edit_whose_range_does_not_fit_is_named_for_a_log_line():
    text = "def add(a, b):\n    return \n"
    fits = [((1, 11), (1, 11)), ((2, 0), (2, 0)), ((1, 40), (1, 40))]  # the empty last line; past a line's end: its end
    for start, end in fits:
        assert change_problem(text, types.Range(start=types.Position(*start), end=types.Position(*end))) is None
    past = change_problem(text, types.Range(start=types.Position(5, 0), end=types.Position(5, 0)))
    assert past == "its start's line 5 and its end's line 5 lie past the document's last line (2): taken as the " \
                   "document's end"
    both = change_problem(text, types.Range(start=types.Position(9, 0), end=types.Position(0, 1)))
    assert both == "its start's line 9 lies past the document's last line (2): taken as the document's end; the range " \
                   "ends (0:1) before it starts (9:0): applied from its end to its start"  # (it said: at the end)
    assert apply_change(text, types.Range(start=types.Position(9, 0), end=types.Position(0, 1)), "X") == "dX"
    backwards = change_problem(text, types.Range(start=types.Position(1, 11), end=types.Position(1, 4)))
    assert backwards == "the range ends (1:4) before it starts (1:11): applied from its end to its start"
    assert [line_count(t) for t in ("", "a", "a\n", "a\r\nb", "a\rb\r")] == [1, 1, 2, 2, 3]


def test_an_edit_ending_inside_a_character_is_applied_at_its_start_with_a_log_line():
    """(It was applied without a word.)"""
    text = "s = '\U0001f600'\n"  # the emoji: UTF-16 units 5 and 6, UTF-8 bytes 5 to 8
    utf8, utf16 = types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf16
    split = types.Range(start=types.Position(0, 6), end=types.Position(0, 6))
    assert change_problem(text, split, utf16) == "its start (0:6) and its end (0:6) fall inside a character: taken as " \
                                                 "that character's start"
    assert apply_change(text, split, "X", utf16) == "s = 'X\U0001f600'\n"
    assert change_problem(text, types.Range(start=types.Position(0, 5), end=types.Position(0, 7)), utf16) is None
    assert change_problem(text, types.Range(start=types.Position(0, 5), end=types.Position(0, 7)), utf8) == \
        "its end (0:7) falls inside a character: taken as that character's start"
    assert change_problem(text, types.Range(start=types.Position(0, 5), end=types.Position(0, 9)), utf8) is None


def test_the_id_of_a_request_that_does_not_parse_is_found_when_its_first_members_say_it():
    assert request_id('{"jsonrpc":"2.0","id":900,"method":"textDocument/inlineCompletion", "params": {') == 900
    assert request_id(' { "id" : "a-1" , "method": "x", "params": [1,') == "a-1"
    assert request_id('{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":5}') is None  # not at the top
    assert request_id('{"jsonrpc":"2.0","id":3,"result":{"a":') is None  # a response: no answer
    assert request_id('{"jsonrpc":"2.0","id":true,') is None
    assert request_id('{"jsonrpc":"2.0",,"id":4}') is None
    assert request_id("not json") is None and request_id("") is None


def test_a_crlf_completion_s_menu_label_has_no_cr():
    from lsprotocol import types

    from nestling.lsp.convert import completion_item

    empty = types.Range(types.Position(0, 0), types.Position(0, 0))
    item = completion_item("if x:\r\n    pass", "", empty)
    assert item.label == item.filter_text == "if x:" and item.text_edit.new_text == "if x:\r\n    pass"
