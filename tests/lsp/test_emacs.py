"""A real editor as the client: Emacs's lsp-mode talks to `nestling lsp`, registered as the README says
(Debian 12's lsp-mode 8 in batch mode, with requests sent by script; lsp-mode 10 from Debian unstable in a
terminal, with keystrokes)."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import EMBEDDED, MODEL_ARGS
from terminal_editor import (COLUMN, EDITORS_BIN, LINE, SOURCE, TMUX, TmuxPane, ar_completion, completed,
                             printable_start, read_text, readme_block, wait_until)

EMACS = shutil.which("emacs")
LSP_MODE = sorted(Path("/usr/share/emacs/site-lisp/elpa").glob("lsp-mode-*"))  # Debian's elpa-lsp-mode


@pytest.mark.skipif(EMACS is None or not LSP_MODE,
                    reason="Emacs or lsp-mode is not installed (.ci/run installs Debian's emacs-nox and elpa-lsp-mode)")
def test_emacs_lsp_mode_gets_inline_and_menu_completions(tmp_path):
    out = tmp_path / "answers.json"
    (tmp_path / ".git").mkdir()  # the project root lsp-mode guesses
    env = dict(os.environ, NESTLING_EMACS_OUT=str(out), NESTLING_LSP_CMD=json.dumps(EMBEDDED),
               NESTLING_FILE=str(tmp_path / "main.py"), HOME=str(tmp_path), TMPDIR=str(tmp_path))
    script = Path(__file__).with_name("emacs_client.el")
    run = subprocess.run([EMACS, "--batch", "-Q", "-l", str(script)], env=env, timeout=300, capture_output=True,
                         text=True, cwd=tmp_path)
    assert out.exists(), run.stderr[-3000:]
    answers = json.loads(out.read_text())
    assert "error" not in answers, (answers, run.stderr[-3000:])
    assert answers["inline_provider"] is True
    assert answers["inline_items"] == 1  # the tiny test model never stops, so there is always a completion
    assert answers["completion_incomplete"] is True and answers["completion_items"] == 1
    # lsp-mode's own completion-at-point turns the server's item into a candidate
    assert len(answers["capf_candidates"]) == 1 and answers["capf_candidates"][0].strip()


LSP_MODE_10 = sorted((EDITORS_BIN.parent / "root/usr/share/emacs/site-lisp/elpa-src").glob("lsp-mode-*"))
TEST_SETUP = """(require 'package)
(setq package-directory-list '({elpa}))  ; lsp-mode 10 and its libraries, not Debian 12's lsp-mode 8
(package-initialize)
(setq lsp-auto-guess-root t lsp-enabled-clients '(nestling) lsp-enable-snippet nil
      lsp-session-file (expand-file-name "lsp-session" user-emacs-directory)
      lsp-response-timeout 120)  ; the first request waits while the server measures its cost curve
(add-hook 'python-mode-hook #'lsp-deferred)
"""


def elisp_list(items: list[str]) -> str:
    return "(" + " ".join(json.dumps(item) for item in items) + ")"


@pytest.mark.skipif(EMACS is None or TMUX is None or not LSP_MODE_10,
                    reason="Emacs, tmux or lsp-mode 10 missing (run scripts/fetch-editors.sh)")
def test_emacs_lsp_mode_10_shows_ghost_text_and_tab_accepts_it(tmp_path):
    source = tmp_path / "main.py"
    source.write_text(SOURCE)
    (tmp_path / ".git").mkdir()
    expected = ar_completion(MODEL_ARGS, source, LINE, COLUMN)
    readme = readme_block("**Emacs**")
    snippet = readme.replace('\'("nestling" "lsp")', "'" + elisp_list(EMBEDDED))
    assert snippet != readme, "the README's Emacs snippet no longer starts `nestling lsp` as expected"
    init = tmp_path / "init.el"
    init.write_text(TEST_SETUP.format(elpa=json.dumps(str(LSP_MODE_10[-1].parent))) + snippet)
    env = dict(os.environ, HOME=str(tmp_path), TERM="xterm-256color")
    shown_start = printable_start(expected)  # Emacs shows control characters as ^B
    assert shown_start, "the tiny model's completion starts with a control character; pick another prompt"

    pane = TmuxPane([EMACS, "-nw", "-Q", "-l", str(init), "main.py"], tmp_path, env)
    try:
        wait_until(lambda: "initialized successfully" in pane.screen(), 120, what="lsp-mode to start nestling")
        pane.keys("C-n", "C-e", "x", "BSpace")  # a change at the end of line 2; after 2 s idle, the request
        wait_until(lambda: shown_start in pane.screen(), 120, what="ghost text")
        pane.keys("Tab", "C-x", "C-s")
        wait_until(lambda: read_text(source) != SOURCE, 30, what="the file to be saved")
        assert read_text(source) == completed(expected)
    finally:
        pane.close()
