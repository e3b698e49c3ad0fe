"""A real editor as the client: Helix (from Debian unstable) in a terminal, configured with the README's
`languages.toml`, asks `nestling lsp` for a completion with keystrokes and accepts it from the menu."""

import json
import os

import pytest

from conftest import EMBEDDED, MODEL_ARGS
from terminal_editor import (COLUMN, LINE, SOURCE, TmuxPane, ar_completion, completed, editor, printable_start,
                             read_text, readme_block, wait_until)

HELIX = editor("hx")


def menu_shows(pane: TmuxPane, label_start: str) -> bool:
    """Ask for completions (Ctrl-x in insert mode) and say whether the menu lists nestling's item."""
    pane.keys("C-x", pause_s=1.0)
    return label_start in pane.screen()


@pytest.mark.skipif(HELIX is None, reason="Helix or tmux missing (run scripts/fetch-editors.sh)")
def test_helix_completion_menu_inserts_what_the_target_writes(tmp_path):
    source = tmp_path / "main.py"
    source.write_text(SOURCE)
    expected = ar_completion(MODEL_ARGS, source, LINE, COLUMN)
    readme = readme_block("**Helix**")
    config = readme.replace('command = "nestling"\nargs = ["lsp"]',
                            f"command = {json.dumps(EMBEDDED[0])}\nargs = {json.dumps(EMBEDDED[1:])}")
    assert config != readme, "the README's Helix snippet no longer starts `nestling lsp` as expected"
    (tmp_path / ".config" / "helix").mkdir(parents=True)
    (tmp_path / ".config" / "helix" / "languages.toml").write_text(config)
    env = dict(os.environ, HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / ".config"),
               XDG_CACHE_HOME=str(tmp_path / ".cache"))
    # The menu's label is the completion's first line; Helix leaves out control characters, so look for
    # the part before the first one.
    label_start = printable_start(expected)
    assert label_start, "the tiny model's completion starts with a control character; pick another prompt"

    pane = TmuxPane([str(HELIX), "main.py"], tmp_path, env)
    try:
        wait_until(lambda: "main.py" in pane.screen(), 30, what="Helix to start")
        pane.keys(":2", "Enter", "A")  # go to line 2, insert at its end
        wait_until(lambda: menu_shows(pane, label_start), 120, interval_s=0.5,
                   what="the completion menu to list nestling's item")
        pane.keys("Tab", "Enter", "Escape", ":w", "Enter")  # select the item, accept it, write the file
        wait_until(lambda: read_text(source) != SOURCE, 30, what="the file to be written")
        assert read_text(source) == completed(expected)
    finally:
        pane.close()
