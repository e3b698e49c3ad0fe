"""FIM prompts: where the cursor splits the text, and what the model is shown around it."""

import pytest

from char_tokenizer import FIM, CharTokenizer
from nestling.daemon.context.fim import FimBudget, LfDocument, build_fim_prompt, lf_only, split_at
from nestling.daemon.context.languages import file_name_hint, uri_file_name
from nestling.daemon.models.target import QWEN_FIM as FIM_TOKENS


def shown(prefix, suffix, **kwargs):
    tokenizer = CharTokenizer()
    return tokenizer.decode(build_fim_prompt(tokenizer, FIM, prefix, suffix, **kwargs).token_ids)


def test_split_at_counts_lines_and_columns_from_zero_and_refuses_positions_outside():
    assert split_at("ab\ncd", 1, 1) == ("ab\nc", "d")
    assert split_at("ab\n", 1, 0) == ("ab\n", "")
    with pytest.raises(ValueError, match="line 3 is outside"):
        split_at("ab\ncd", 2, 0)
    with pytest.raises(ValueError, match="past the end of line 1"):
        split_at("ab\ncd", 0, 3)


def test_prompt_is_prefix_then_suffix_then_the_middle_marker():
    assert shown("def f():\n    ", "\n\nx = 1\n") == "<pre>def f():\n    <suf>\n\nx = 1\n<mid>"


def test_at_the_end_of_a_file_without_a_final_newline_the_suffix_shown_is_a_line_break():
    # with nothing after the cursor the default model repeated the line's indentation (8 spaces for 4)
    assert shown("def f():\n    ", "") == "<pre>def f():\n    <suf>\n<mid>"
    assert shown('def f():\n    """Doc."""\n', "") == '<pre>def f():\n    """Doc."""\n<suf><mid>'  # at a line start:
    # nothing to repeat, and HumanEval's prompts stay as the head learned them
    prompt = build_fim_prompt(CharTokenizer(), FIM, "x = ", "")
    assert prompt.suffix == ""  # what the file holds after the cursor: nothing, for the post-processing


def test_budgets_cut_at_line_boundaries():
    text = "".join(f"line{i}\n" for i in range(10))
    assert shown(text, text, budget=FimBudget(prefix_tokens=12, suffix_tokens=12)) == \
        "<pre>line8\nline9\n<suf>line0\nline1\n<mid>"


def test_a_budget_cut_inside_a_long_line_keeps_its_end_and_stays_put_while_typing():
    """(QA: after a 30,000-character line the next line start left nothing before the cursor's line in the prompt.)"""
    tokenizer, budget = CharTokenizer(), FimBudget(prefix_tokens=40, suffix_tokens=8)
    prefix = "import os\nDATA = '" + "x" * 1000 + "'\nx = "
    prompt = build_fim_prompt(tokenizer, FIM, prefix, "", budget=budget)
    assert prompt.prefix == prefix[-40:] and prompt.prefix.endswith("x" * 30 + "'\nx = ")
    start, previous = prompt.prefix_start, None
    for typed in ("l", "lo", "loa", "load"):  # the first keystroke moves the start to leave slack; then it stays put
        start = build_fim_prompt(tokenizer, FIM, prefix + typed, "", budget=budget, sticky_start=start).prefix_start
        assert typed == "l" or start == previous  # (the prompt's state is reused)
        previous = start
    short = "import os\nname = 'abc'\n" + "".join(f"v{i} = {i}\n" for i in range(10)) + "x = "  # short lines: a
    assert build_fim_prompt(tokenizer, FIM, short, "", budget=budget).prefix.startswith("v")  # line start, as before


@pytest.mark.parametrize("line, budget", [("中文😀" * 3000, 40), ("中文😀" * 3000, 1536), ("é" * 9000, 100)])
def test_a_cut_inside_a_long_line_of_characters_of_several_bytes_keeps_within_the_budget(line, budget):
    """(review: the budget's tokens began inside a character, and the tail kept came to a few tokens more.)"""
    from tiny import tiny_tokenizer

    tokenizer = tiny_tokenizer()
    prompt = build_fim_prompt(tokenizer, FIM_TOKENS, f'DATA = "{line}"\nx = ', "",
                              budget=FimBudget(prefix_tokens=budget, suffix_tokens=8))
    kept = len(tokenizer(prompt.prefix, add_special_tokens=False)["input_ids"])
    assert budget - 8 <= kept <= budget and prompt.prefix.endswith('"\nx = ')


def test_every_line_break_is_a_line_feed():
    assert lf_only("def f(x):\r    return x\r\r\nprint(f(1))\r") == "def f(x):\n    return x\n\nprint(f(1))\n"


def test_a_document_is_read_with_line_feeds_and_keeps_its_most_common_line_break():
    document = LfDocument.of("a\r\nbc\r\nd", 5)  # the cursor after "bc"
    assert (document.text, document.cursor, document.line_break) == ("a\nbc\nd", 4, "\r\n")
    assert document.in_its_line_breaks("x\ny") == "x\r\ny"
    assert LfDocument.of("a\r\nb", 2).cursor == 1  # between CR and LF: before the line break
    assert LfDocument.of("a\rb\rc\r\n", 3).line_break == "\r"
    assert LfDocument.of("a\nb\r\nc\n", 0).line_break == "\n"
    plain = LfDocument.of("a\nb", 3)
    assert (plain.text, plain.cursor, plain.in_its_line_breaks("x\n")) == ("a\nb", 3, "x\n")


def test_a_document_of_one_line_at_most_is_named_first_for_its_language():
    """(With only the FIM markers the default model wrote Angular TypeScript in an empty main.go, app.py or lib.rs.)"""
    assert shown("", "", path="main.go") == "<|file_sep|>main.go\n<pre><suf><mid>"
    assert shown("imp", "\n\n", path="app.py") == "<|file_sep|>app.py\n<pre>imp<suf>\n\n<mid>"
    assert shown("\n\n#include <", "", path="util.c").startswith("<|file_sep|>util.c\n<pre>")
    assert shown("package main\n\nfu", "", path="main.go") == "<pre>package main\n\nfu<suf>\n<mid>"  # a second line:
    # enough to go on, and the name had cost a right answer there
    assert shown("", "", path=None) == "<pre><suf><mid>"  # no name to give
    long = "def f():\n    return 1\n"
    assert shown(long, "", path="a.py", budget=FimBudget(path_header=True)).startswith("<|file_sep|>a.py\n<pre>def")


def test_the_file_name_hint_comes_from_the_path_or_the_language():
    assert file_name_hint(uri_file_name("file:///home/me/my%20proj/main.go"), "go") == "main.go"
    assert file_name_hint(uri_file_name("/home/me/src/lib.rs")) == "lib.rs"
    assert file_name_hint(uri_file_name("C:\\src\\App.java")) == "App.java"
    assert file_name_hint("a#b.py") == "a#b.py" and file_name_hint("100%25.py") == "100%25.py"  # a plain name as it is
    assert file_name_hint(uri_file_name("untitled:Untitled-1"), "python") == "untitled.py"  # an editor's new buffer
    assert file_name_hint("notes", "typescriptreact") == "untitled.tsx"
    assert file_name_hint("nb.ipynb", "python") == "untitled.py"  # a notebook's cell: the languageId's suffix
    assert file_name_hint("notes.txt", "plaintext") == "notes.txt"  # a language we have no grammar for: the name
    assert file_name_hint("notes", "plaintext") is None and file_name_hint(None) is None


def test_a_file_name_that_would_write_the_prompt_is_no_hint():
    """(Found by review: `a%0Aimport%20os%0A.py` put lines of code in the header, `%3C%7Cfim_middle%7C%3E.py` a
    control token.)"""
    assert uri_file_name("file:///x/a%0Aimport%20os%0A.py") == "a\nimport os\n.py"
    assert file_name_hint("a\nimport os\n.py") is None
    assert file_name_hint("a\nimport os\n.py", "python") == "untitled.py"
    assert file_name_hint("<|fim_middle|>.py", "python") == "untitled.py"
    assert file_name_hint("tab\there.py") is None
