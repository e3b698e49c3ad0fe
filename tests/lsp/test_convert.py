"""Edge conversions of the language server (lsp/convert.py)."""

from nestling.lsp.convert import encodable


def test_lone_surrogates_become_one_character_each_and_valid_text_is_kept_as_it_is():
    text = "x = 'caf\u00e9 \U0001f600'\n"
    assert encodable(text) is text
    broken = "a = '\ud800'\nb = 1\n"  # JSON may carry a lone surrogate; UTF-8 (protobuf, the tokenizer) cannot
    fixed = encodable(broken)
    assert fixed == "a = '?'\nb = 1\n" and len(fixed) == len(broken)
    fixed.encode("utf-8")
