"""A real editor as the client: Emacs's lsp-mode (batch mode) talks to `nestling lsp`, registered as the
README says."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import EMBEDDED

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
