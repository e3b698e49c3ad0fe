"""A real editor as the client: Neovim's built-in LSP client talks to `nestling lsp` (Debian 12's 0.7 headless,
with requests sent by script; 0.12 from Debian unstable in a terminal, with keystrokes)."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import EMBEDDED, MODEL_ARGS
from terminal_editor import (COLUMN, LINE, SOURCE, TmuxPane, ar_completion, completed, editor, read_text, readme_block,
                             wait_until)

NVIM = shutil.which("nvim")


@pytest.mark.skipif(NVIM is None, reason="Neovim is not installed (.ci/run installs Debian's neovim)")
def test_neovim_gets_inline_and_menu_completions(tmp_path):
    out = tmp_path / "answers.json"
    env = dict(os.environ, NESTLING_NVIM_OUT=str(out), NESTLING_LSP_CMD=json.dumps(EMBEDDED),
               NESTLING_FILE=str(tmp_path / "main.py"), HOME=str(tmp_path))
    script = Path(__file__).with_name("nvim_client.lua")
    subprocess.run([NVIM, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {script}"],
                   env=env, timeout=300, capture_output=True, cwd=tmp_path)
    answers = json.loads(out.read_text())
    assert "error" not in answers, answers
    assert answers["inline_provider"] is True
    inline = answers["inline"]["result"]
    assert "items" in inline and len(inline["items"]) == 1  # the tiny test model never stops: always a completion
    completion = answers["completion"]["result"]
    assert completion["isIncomplete"] is True and len(completion["items"]) == 1
    for item in completion["items"]:
        assert item["textEdit"]["range"]["end"] == {"line": 1, "character": 12}


NVIM_012 = editor("nvim")


def lua_list(items: list[str]) -> str:
    return "{ " + ", ".join(json.dumps(item) for item in items) + " }"


def ghost_text(remote) -> str | None:
    """The inline completion Neovim is showing (its extmark's virtual text and lines), or None."""
    marks = json.loads(remote('luaeval("vim.json.encode(vim.api.nvim_buf_get_extmarks(0, '
                              'vim.api.nvim_get_namespaces()[\'nvim.lsp.inline_completion\'], 0, -1, '
                              '{details = true}))")') or "[]")
    if not marks:
        return None
    details = marks[0][3]
    lines = ["".join(chunk[0] for chunk in details["virt_text"])]
    lines += ["".join(chunk[0] for chunk in line) for line in details.get("virt_lines", [])]
    return "\n".join(lines)


def as_displayed(text: str) -> str:
    """Text as Neovim shows it in virtual text: control characters in caret notation (^B for \\x02)."""
    return re.sub(r"[\x00-\x08\x0b-\x1f]", lambda m: "^" + chr(ord(m.group(0)) + 64), text)


@pytest.mark.skipif(NVIM_012 is None, reason="Neovim 0.12 or tmux missing (run scripts/fetch-editors.sh)")
def test_neovim_012_shows_ghost_text_and_tab_accepts_it(tmp_path):
    """The README's Neovim 0.12 setup, typed into by keystrokes: entering insert mode shows the completion
    as ghost text, <Tab> puts it in the buffer, and it is what the target alone would have written."""
    source = tmp_path / "main.py"
    source.write_text(SOURCE)
    expected = ar_completion(MODEL_ARGS, source, LINE, COLUMN)
    readme = readme_block("**Neovim 0.12+**")
    config = readme.replace('{ "nestling", "lsp" }', lua_list(EMBEDDED))
    assert config != readme, "the README's Neovim 0.12 snippet no longer starts `nestling lsp` as expected"
    (tmp_path / "init.lua").write_text(config)
    server = str(tmp_path / "nvim.sock")
    env = dict(os.environ, HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / ".config"),
               XDG_STATE_HOME=str(tmp_path / ".state"), XDG_DATA_HOME=str(tmp_path / ".data"),
               NVIM_LOG_FILE=str(tmp_path / "nvim.log"))

    def remote(expression: str) -> str:
        run = subprocess.run([str(NVIM_012), "--server", server, "--remote-expr", expression], env=env,
                             cwd=tmp_path, capture_output=True, text=True, timeout=30)
        return run.stdout.strip()

    pane = TmuxPane([str(NVIM_012), "-u", str(tmp_path / "init.lua"), "-i", "NONE", "-n", "--listen", server,
                     "main.py"], tmp_path, env)
    try:
        wait_until(lambda: remote('luaeval("#vim.tbl_filter(function(c) return c.initialized end, '
                                  'vim.lsp.get_clients({bufnr = 0, name = \'nestling\'}))")') == "1",
                   120, what="Neovim to start nestling lsp and attach it to the buffer")
        pane.keys("2G", "A")  # insert mode at the end of line 2: the automatic inline request
        shown = wait_until(lambda: ghost_text(remote), 120, what="ghost text")
        assert shown == as_displayed(expected)
        assert "names = " + expected[:1] in pane.screen()
        pane.keys("Tab", "Escape", ":w", "Enter")
        wait_until(lambda: read_text(source) != SOURCE, 30, what="the buffer to be written")
        assert read_text(source) == completed(expected)
    finally:
        pane.close()
