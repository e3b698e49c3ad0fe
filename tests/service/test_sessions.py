"""Per-document sessions: what a document's last completion leads the service to expect next."""

from nestling.daemon.service.sessions import LastCompletion


def test_the_rest_of_the_last_completion_is_expected_while_the_user_types_it():
    last = LastCompletion(prefix="x = comp", suffix="\nprint(x)\n", text="ute(values)")
    assert last.rest_after("x = comp", "\nprint(x)\n") == "ute(values)"  # asked again at the same place
    assert last.rest_after("x = compu", "\nprint(x)\n") == "te(values)"
    assert last.rest_after("x = compute(", "\nprint(x)\n") == "values)"


def test_nothing_is_expected_after_any_other_edit():
    last = LastCompletion(prefix="x = comp", suffix="\nprint(x)\n", text="ute(values)")
    assert last.rest_after("x = compa", "\nprint(x)\n") == ""  # typed something else
    assert last.rest_after("x = com", "\nprint(x)\n") == ""  # deleted a character
    assert last.rest_after("y = compu", "\nprint(x)\n") == ""  # changed the text before
    assert last.rest_after("x = compu", "\nprint(y)\n") == ""  # changed the text after
    assert last.rest_after("x = compute(values)", "\nprint(x)\n") == ""  # typed all of it
