"""Per-document sessions: what a document's last completion leads the service to expect next, and the memory limit they
are kept under."""

from nestling.daemon.service.sessions import CONTEXT_CHARS, RECENT_COMPLETIONS, PastCompletion, Session


def test_the_rest_of_the_last_completion_is_expected_while_the_user_types_it():
    last = PastCompletion.at(prefix="x = comp", suffix="\nprint(x)\n", text="ute(values)")
    assert last.rest_after("x = comp", "\nprint(x)\n") == "ute(values)"  # asked again at the same place
    assert last.rest_after("x = compu", "\nprint(x)\n") == "te(values)"
    assert last.rest_after("x = compute(", "\nprint(x)\n") == "values)"


def test_nothing_is_expected_after_any_other_edit():
    last = PastCompletion.at(prefix="x = comp", suffix="\nprint(x)\n", text="ute(values)")
    assert last.rest_after("x = compa", "\nprint(x)\n") == ""  # typed something else
    assert last.rest_after("x = com", "\nprint(x)\n") == ""  # deleted a character
    assert last.rest_after("y = compu", "\nprint(x)\n") == ""  # changed the text before
    assert last.rest_after("x = compu", "\nprint(y)\n") == ""  # changed the text after
    assert last.rest_after("x = compute(values)", "\nprint(x)\n") == ""  # typed all of it


def test_an_undone_keystroke_finds_the_completion_from_before_it():
    session = Session("file:///a.py")
    session.remember(PastCompletion.at("x = comp", "\n", "ute(values)"))
    session.remember(PastCompletion.at("x = compa", "\n", "re(a, b)"))  # a typo...
    assert session.expected_text("x = compar", "\n") == "e(a, b)"
    assert session.expected_text("x = comp", "\n") == "ute(values)"  # ...undone: asked where it was before
    assert session.expected_text("x = compu", "\n") == "te(values)"
    assert session.expected_text("y = ", "\n") == ""


def test_one_completion_is_kept_per_place_and_only_the_newest_few():
    session = Session("file:///a.py")
    session.remember(PastCompletion.at("a", "", "first"))
    session.remember(PastCompletion.at("a", "", "second"))
    assert session.expected_text("a", "") == "second" and len(session.recent_completions) == 1
    for index in range(RECENT_COMPLETIONS + 1):
        session.remember(PastCompletion.at(f"b{index}", "", "text"))
    assert len(session.recent_completions) == RECENT_COMPLETIONS and session.expected_text("a", "") == ""


def test_only_the_text_near_the_cursor_is_kept_and_compared():
    far, near = "# a long file\n" * 5000, "x = comp"
    last = PastCompletion.at(far + near, "\n" + far, "ute(values)")
    assert len(last.prefix_end) == len(last.suffix_start) == CONTEXT_CHARS  # not the whole document
    assert last.rest_after(far + near + "u", "\n" + far) == "te(values)"
    edited_far = "#" + far[1:]  # an edit the prompt's window does not reach: the model sees the same
    assert last.rest_after(edited_far + near + "u", "\n" + far) == "te(values)"
    assert last.rest_after(far + "y = comp" + "u", "\n" + far) == ""  # near the cursor: it counts
    assert last.rest_after(far + near + "u", "\n" + far + "more") == ""  # the text after it grew: an edit there


def test_a_character_the_completion_was_cut_inside_is_not_expected():
    last = PastCompletion.at("s = ", "", "'caf\ufffd")  # cut between the two bytes of "é"
    assert last.rest_after("s = '", "") == "caf"


def test_typing_a_completion_shown_without_the_indentation_the_model_added_follows_it():
    from nestling.daemon.service.sessions import PastCompletion

    last = PastCompletion.at("class P:\n    x = 1\n\n    ", "", "    def __str__(self):")
    assert last.rest_after("class P:\n    x = 1\n\n    ", "") == "    def __str__(self):"  # asked again there
    assert last.rest_after("class P:\n    x = 1\n\n    de", "") == "f __str__(self):"  # typing what was shown
    assert last.rest_after("class P:\n    x = 1\n\n    cl", "") == ""


def test_the_cache_limit_counts_the_documents_texts_and_parses_too():
    """(QA: each document's text and parse tree, ~40 bytes a character, were held outside the limit: 8 documents of
    4M characters took 1.2 GB while the cache said 24 MiB of 1,024.)"""
    from nestling.daemon.context.languages import find_language
    from nestling.daemon.context.syntax import SyntaxDocument
    from nestling.daemon.service.sessions import SessionStore

    code = "".join(f"def f{i}(x):\n    return [x + {i}, (x, {i})]\n\n" for i in range(3000))
    parsed, plain = SyntaxDocument(code, find_language("python")), SyntaxDocument(code, None)
    assert plain.held_bytes() >= 2 * len(code) and parsed.held_bytes() > 10 * plain.held_bytes()  # (the tree's nodes)
    store = SessionStore(limit_bytes=int(2.5 * parsed.held_bytes()))
    for n in range(4):
        store.get(f"file:///{n}.py").syntax = SyntaxDocument(code, find_language("python"))
        store.enforce_limit(keep=f"file:///{n}.py")
    assert len(store) == 2 and store.snapshot == (2 * parsed.held_bytes(), 2)  # the two most recent (no model state)
