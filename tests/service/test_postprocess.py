from nestling.daemon.context.syntax import Region
from nestling.daemon.service.postprocess import CursorContext, block_end, finalize, line_mode


def ctx(prefix, suffix="", region=Region.LOGIC, brace=False):
    return CursorContext.from_text(prefix, suffix, region, brace)


def test_auto_mode():
    assert line_mode("auto", ctx("x = foo(", ")\n")) == "single"  # mid-line
    assert line_mode("auto", ctx("def f():\n    ")) == "multi"  # empty block start
    assert line_mode("auto", ctx("if x:")) == "multi"  # block opener typed
    assert line_mode("auto", ctx("total = a +")) == "single"
    assert line_mode("auto", ctx("# explain", region=Region.COMMENT)) == "single"
    assert line_mode("single", ctx("def f():\n    ")) == "single"


def test_single_line_cuts_at_the_newline():
    c = ctx("total = a +", "\nprint(total)\n")
    assert finalize(" b\nprint(total)\n", c, "single") == " b"
    assert block_end(" b", c, "single") is None  # no newline yet: keep generating


def test_a_single_line_never_ends_with_a_cr():
    c = ctx("a = 1\nb = ", "\nprint(b)\n")  # (documents reach here with line feeds: service/completion.py)
    assert finalize("total([4, 5, 6])\r\nprint(b)\n", c, "single") == "total([4, 5, 6])"  # a CR the model wrote
    assert finalize("total([4, 5, 6])\r", c, "single") == "total([4, 5, 6])"  # stopped between CR and LF


def test_single_line_on_an_empty_line_skips_leading_newlines():
    c = ctx("def f():\n    ", "\n")
    assert finalize("\nreturn 1\nmore", c, "single") == "\nreturn 1"


def test_multi_line_stops_when_the_block_ends_python():
    c = ctx("def f(xs):\n    ", "\n\nprint(f([1]))\n")
    text = "total = 0\n    for x in xs:\n        total += x\n    return total\n\nprint(f([2]))\n"
    assert finalize(text, c, "multi") == "total = 0\n    for x in xs:\n        total += x\n    return total"


def test_multi_line_stops_before_closing_the_enclosing_brace():
    c = ctx("function f(a) {\n  ", "\n}\n", brace=True)
    text = "const b = a * 2;\n  if (b) {\n    return b;\n  }\n  return 0;\n}\n\nfunction g() {"
    assert finalize(text, c, "multi") == "const b = a * 2;\n  if (b) {\n    return b;\n  }\n  return 0;"


def test_text_the_suffix_has_is_dropped():
    c = ctx("print(foo(", "))\n")
    assert finalize("x))", c, "single") == "x"
    c = ctx("if x:\n    ", "\nreturn y\n")
    assert finalize("y = 1\n    return y", c, "multi") == "y = 1"
    go = ctx("func f(x int) {\n\t", "\n}\n", brace=True)
    block = "if x > 0 {\n\t\tuse(x)\n\t}"
    assert finalize(block, go, "multi") == block  # its `}` closes its `if`, not the function the suffix closes


def test_whitespace_alone_is_never_offered():
    assert finalize("   \n  ", ctx("x = 1\n"), "multi") == ""
    assert finalize("\n", ctx("x = 1"), "single") == ""


def test_a_line_ends_the_block_once_its_indentation_is_known():
    c = ctx("def f(xs):\n    ", "\n")
    assert block_end("return 1\n  ", c, "multi") is None  # only blanks yet: the line may go on indented
    assert block_end("return 1\nprin", c, "multi") == len("return 1")  # dedented: it leaves the block
    assert block_end("return 1\nprint(1)\n", c, "multi") == len("return 1")


def test_a_completion_cut_by_the_token_limit_does_not_repeat_the_lines_after_the_cursor():
    c = ctx("def f(x):", "\n    return x\n\n")  # (it gave the body again and a partial 'def g(x' after it)
    assert finalize("\n    return x\n\ndef g(x", c, "multi") == ""
    c = ctx("x = 1\n", "")
    assert finalize("y = 2\nz = 3\n\ndef g(", c, "multi") == "y = 2\nz = 3"  # top level: the next unit began
    c = ctx("def f():\n    return foo(", "")  # a closing bracket last: the completion's own, kept as before
    assert finalize("\n        a,\n    )", c, "multi") == "\n        a,\n    )"


def test_text_ends_before_a_nul_character():
    c = ctx("total = a +", "\n")
    assert block_end(" b\x00c", c, "single") == 2  # also an early stop during generation
    assert finalize(" b\x00c\nmore", c, "single") == " b"
    assert finalize("\x00tail", ctx("def f():\n    "), "multi") == ""
    # a NUL after the end of the line or block does not carry the text past that end
    assert block_end(" b\nc\x00d", c, "single") == 2
    assert finalize("\n  \x01b\x00", ctx("    names = ", "\n    return names\n"), "single") == ""
    block = ctx("def f(xs):\n    ", "\n")
    assert block_end("return 1\nprint(1)\n\x00", block, "multi") == len("return 1")
    assert block_end("return 1\nprint(1)\x00", block, "multi") == len("return 1")  # nothing follows a NUL
    assert block_end("return 1\n    x = 2\x00", block, "multi") == len("return 1\n    x = 2")


def test_multi_line_at_the_top_level_stops_before_the_next_unit_after_a_blank_line():
    c = ctx("import os\n\n", "")  # a blank line at column 0: nothing dedents below it
    text = "def size(path):\n    return os.path.getsize(path)\n\n\ndef main():\n    pass\n"
    assert finalize(text, c, "multi") == "def size(path):\n    return os.path.getsize(path)"
    assert block_end("def size(path):\n    return 1\n\n\n", c, "multi") is None  # what comes next is not known yet
    assert block_end("def size(path):\n    return 1\n\n\ndef ma", c, "multi") == len("def size(path):\n    return 1")
    methods = "class A:\n    def f(self):\n        pass\n\n    def g(self):\n        pass\n\nx = A()\n"
    assert finalize(methods, c, "multi") == "class A:\n    def f(self):\n        pass\n\n    def g(self):\n        pass"
    assert finalize("\nimport sys\nimport re\n\nx = 1\n", c, "multi") == "\nimport sys\nimport re"  # a leading blank: kept
    braces = ctx("#include <stdio.h>\n\n", "", brace=True)
    text = "int add(int a, int b) {\n\nreturn a + b;\n}\n\nint main() {\n"
    assert finalize(text, braces, "multi") == "int add(int a, int b) {\n\nreturn a + b;\n}"  # inside braces: no cut
    assert finalize("x = 1\n", ctx("def f():\n    return 1\n\n"), "multi") == "x = 1"


def test_on_a_blank_lines_indentation_more_indentation_the_model_writes_goes_where_no_block_opens():
    c = ctx("function add(a, b) {\n  ", "", brace=True)  # the cursor already indented into the block
    assert finalize("  return a + b;\n}", c, "multi") == "return a + b;"
    assert finalize("return a + b;", c, "multi") == "return a + b;"
    inside = ctx("function add(a, b) {\n  ", "\n}\n", brace=True)  # text after the cursor too
    assert finalize("  return a + b;", inside, "multi") == "return a + b;"
    method = ctx("class P:\n    def __init__(self, y):\n        self.y = y\n\n    ", "")  # a method after the last
    assert finalize("    def __str__(self):\n            return 'P'", method, "multi") == \
        "def __str__(self):\n        return 'P'"  # (the lines after the first were written in its frame: they move too)
    go = ctx("\tfor _, x := range xs {\n\t\tif x < 0 {\n\t\t\t", "\n\t\t}\n\t}\n", brace=True)
    assert finalize("\tcontinue", go, "multi") == "continue"


def test_the_lines_after_an_over_indented_first_line_move_only_where_they_were_written_in_its_frame():
    loop = ctx("for x in xs:\n    ", "\n")
    assert finalize("    total += x\n    count += 1", loop, "multi") == "total += x\n    count += 1"  # (stay in the loop)
    body = ctx("def f():\n    x = 1\n    ", "\n")
    assert finalize("    y = 2\n    return y", body, "multi") == "y = 2\n    return y"
    block = ctx("function f(a, b) {\n  ", "\n}\n", brace=True)
    assert finalize("  const c = a + b;\n  return c;", block, "multi") == "const c = a + b;\n  return c;"
    method = ctx("class P:\n    def __init__(self, y):\n        self.y = y\n\n    ", "")
    assert finalize("    def __str__(self):\n        return 'P'", method, "multi") == \
        "def __str__(self):\n        return 'P'"  # its body at 8: in the cursor's frame, not the first line's
    assert finalize("    x = 1\n        y = 2", body, "multi") == "x = 1\n    y = 2"  # both in the first line's frame
    go = ctx("\tfor i := 0; i < n; {\n\t\ti++\n\t\t", "\n\t}\n", brace=True)  # (`i++` is no hanging operator)
    assert finalize("\tsum += i", go, "multi") == "sum += i"


def test_a_callbacks_block_and_a_header_over_several_lines_open_their_blocks_where_they_start():
    callback = ctx("describe('parser', () => {\n  it('parses numbers', () => {\n    ", "", brace=True)
    assert finalize("    expect(parse('123')).toBe(123);\n  });", callback, "multi") == "expect(parse('123')).toBe(123);"
    then = ctx("fetch(url).then((res) => {\n  ", "", brace=True)  # (all its lines a level deep: they move together)
    assert finalize("  if (res.ok) {\n      return res.json();\n    } else {\n      throw err;", then, "multi") == \
        "if (res.ok) {\n    return res.json();\n  } else {\n    throw err;"
    lam = ctx("class P {\n    void all(List<String> xs) {\n        xs.forEach(x -> {\n            ", "", brace=True)
    assert finalize("    System.out.println(x);", lam, "multi") == "System.out.println(x);"
    signature = ctx("class Config:\n    def merge(self, other,\n              strict=False):\n        ", "\n")
    assert finalize("    if strict:\n            return other\n        else:", signature, "multi") == \
        "if strict:\n            return other\n        else:"  # (its body at 12: in the cursor's frame, kept)
    condition = ctx('def ok(user, perms):\n    if (user.active and\n            "admin" in perms):\n        ', "\n")
    assert finalize("    return True", condition, "multi") == "return True"


def test_on_a_blank_lines_indentation_the_model_keeps_the_indentation_of_a_block_opened_above_or_a_hanging_line():
    commented = ctx("    if x:  # positive\n    ", "\n")  # the opener's comment aside
    assert finalize("    return 1", commented, "multi") == "    return 1"
    braceless = ctx("    if (x)\n    ", "\n", brace=True)
    assert finalize("    return 1;", braceless, "multi") == "    return 1;"
    assert finalize("    run();", ctx("    } else\n    ", "\n", brace=True), "multi") == "    run();"
    docstring = ctx('def f(x):\n    """Args:\n        x: first\n        ', '\n    """\n', region=Region.COMMENT)
    assert finalize("    more about x", docstring, "multi") == "    more about x"
    chained = ctx("  return items\n  ", "\n", brace=True)
    assert finalize("  .filter(f)", chained, "multi") == "  .filter(f)"
    pep8 = ctx("def long_function_name(\n        ", "\n")
    assert finalize("    var_one, var_two):", pep8, "multi") == "    var_one, var_two):"
    literal = ctx("    table = {\n        ", "\n")  # a Python dict: hanging, not a block
    assert finalize("    'a': 1,", literal, "multi") == "    'a': 1,"
    not_yet = ctx("  if (a) {\n  ", "", brace=True)  # not yet indented into the block: the model's indentation stays
    assert finalize("  return a;", not_yet, "multi") == "  return a;"
    hanging = ctx("total = add(first,\n", "\n")  # (the cursor at the line start: no indentation typed)
    assert finalize("            second)", hanging, "multi") == "            second)"
    hanging = ctx("    total = add(first,\n    ", "\n")
    assert finalize("        second)", hanging, "multi") == "        second)"
    chained = ctx("    value = (first +\n    ", "\n")
    assert finalize("    second)", chained, "multi") == "    second)"
    mid_line = ctx("    x = ", "\n")  # not a blank line
    assert finalize("  1", mid_line, "single") == "  1"


def test_the_rest_of_the_line_written_again_before_a_comment_is_dropped_with_the_comment():
    assert finalize("4))  # Output: 12", ctx("print(area(3, ", "))\n"), "single") == "4"  # (it read "4))  # ...))")
    assert finalize("x));  // three", ctx("f(g(", "));\n", brace=True), "single") == "x"
    assert finalize("a + b) * 2", ctx("x = (", ")\n"), "single") == "a + b) * 2"  # more code, not a comment: kept


def test_a_markdown_fence_ends_the_text_before_its_line():
    """(At a Python file's end the default model closed the code it wrote with a ``` line; it was kept.)"""
    end = ctx("def main():\n    pass\n\n\n", "")
    text = 'if __name__ == "__main__":\n    main()\n```\n\nIn this code, we'
    assert finalize(text, end, "multi") == 'if __name__ == "__main__":\n    main()'
    assert block_end('if __name__ == "__main__":\n    main()\n``', end, "multi") is None  # not yet a fence
    assert finalize("```python\nprint(1)\n", end, "multi") == ""  # the fence starts the completion
    braces = ctx("int main(void) {\n  ", "\n}\n", brace=True)
    assert finalize("return 0;\n  ```\n", braces, "multi") == "return 0;"
    docstring = ctx('def f():\n    """Example:\n\n    ', '\n    """\n', region=Region.COMMENT)
    assert finalize("```python\n    f()\n    ```", docstring, "multi").startswith("```python")  # Markdown in a docstring


def test_a_markdown_fence_in_a_string_the_completion_opens_or_in_another_language_is_kept():
    """(Found by review: a docstring with a fenced example was cut after its first line; Markdown lost its fences.)"""
    body = ctx("def usage():\n    ", "\n")
    docstring = 'r"""Run it:\n\n    ```bash\n    tool run\n    ```\n    """\n    return 1'
    assert finalize(docstring, body, "multi") == docstring
    template = ctx("function help() {\n  ", "\n}\n", brace=True)
    literal = "return `Usage:\n  ```sh\n  tool run\n  ```\n  `;"
    assert finalize(literal, template, "multi") == literal
    from dataclasses import replace

    markdown = replace(ctx("# Tool\n\n## Usage\n\n", "", region=Region.NEUTRAL), code=False)
    assert finalize("```bash\ntool run\n```", markdown, "multi") == "```bash\ntool run\n```"
