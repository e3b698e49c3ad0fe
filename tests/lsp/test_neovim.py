"""A real editor as the client: headless Neovim's built-in LSP client talks to `nestling lsp`."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import EMBEDDED

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
    assert "items" in inline and len(inline["items"]) <= 1
    completion = answers["completion"]["result"]
    assert completion["isIncomplete"] is True and len(completion["items"]) <= 1
    for item in completion["items"]:
        assert item["textEdit"]["range"]["end"] == {"line": 1, "character": 12}
