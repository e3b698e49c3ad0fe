"""Real editors as LSP clients, driven the way a user drives them: by keystrokes (terminal editors in a tmux
pane; VS Code in headless Chromium, see test_vscode.py), each completing SOURCE at (LINE, COLUMN).

Neovim 0.12, Helix and lsp-mode 10 come from Debian unstable through `scripts/fetch-editors.sh`, VS Code
through `scripts/fetch-vscode.sh` (`.ci/run` calls both); the tests find them under `$NESTLING_EDITORS`
(default: `.editors` in the repository) and skip without them. Each test configures its editor with the
README's own snippet, only the server command swapped for the embedded tiny model, so the README is what
gets tested, and checks the saved file against what the target alone writes (`nestling complete --mode ar`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EDITORS_BIN = Path(os.environ.get("NESTLING_EDITORS", REPO / ".editors")) / "bin"
TMUX = shutil.which("tmux")
SOURCE = "def main(path):\n    names = \n    return names\n"  # the file each editor test completes in
LINE, COLUMN = 2, 13  # 1-based: the end of `    names = `, where the completion goes


def completed(text: str) -> str:
    """SOURCE with `text` accepted at (LINE, COLUMN)."""
    return SOURCE.replace("names = \n", "names = " + text + "\n")


def printable_start(text: str, limit: int = 20) -> str:
    """The start of `text` up to its first control character: what a terminal editor shows of it as is."""
    return re.split(r"[\x00-\x1f]", text)[0][:limit]


def editor(name: str) -> Path | None:
    """The fetched editor's wrapper, or None (with tmux missing too: the tests need both)."""
    path = EDITORS_BIN / name
    return path if path.exists() and TMUX else None


def readme_block(marker: str) -> str:
    """The first fenced code block after `marker` in the README."""
    text = (REPO / "README.md").read_text()
    start = text.index(marker)
    match = re.search(r"```[a-z]*\n(.*?)```", text[start:], re.S)
    return match.group(1)


def ar_completion(model_args: list[str], file: Path, line: int, col: int) -> str:
    """What the target alone writes at (line, col), 1-based (`nestling complete --mode ar`), cut where the daemon
    cuts it for display (the end of the line or block, a NUL: daemon/service/postprocess.py): what the editor
    must show. The tiny model writes no line break, NUL or blank token (`tiny.unwritten_tokens`): its text is one
    line, never empty, so the editor always has ghost text to show."""
    from nestling.daemon.context.fim import split_at
    from nestling.daemon.context.languages import find_language
    from nestling.daemon.context.syntax import SyntaxDocument
    from nestling.daemon.service.postprocess import cursor_context, finalize, line_mode

    command = [sys.executable, "-m", "nestling.daemon.cli.main", "complete", *model_args, "--mode", "ar",
               "--json", "--line", str(line), "--col", str(col), str(file)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    text = read_text(file)
    prefix, suffix = split_at(text, line - 1, col - 1)
    language = find_language(None, str(file))
    region = SyntaxDocument(text, language).region_at(len(prefix))
    context = cursor_context(prefix, suffix, region, language)
    return finalize(json.loads(run.stdout)["text"], context, line_mode("auto", context))


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="surrogateescape")


def wait_until(condition, timeout_s: float, interval_s: float = 0.25, what: str = "condition"):
    """Poll `condition()` until it returns something truthy; that value, or AssertionError at the deadline."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


class TmuxPane:
    """One program in a detached tmux session on a private socket (nothing shared with a user's tmux)."""

    def __init__(self, command: list[str], cwd: Path, env: dict[str, str], width: int = 120, height: int = 30):
        self.socket = str(cwd / "tmux.sock")
        self.env = env
        self._tmux("new-session", "-d", "-s", "editor", "-x", str(width), "-y", str(height), "-c", str(cwd),
                   shlex.join(command) + "; sleep 600")  # the pane outlives the editor: its last screen stays

    def _tmux(self, *args: str) -> str:
        run = subprocess.run([TMUX, "-S", self.socket, "-f", "/dev/null", *args], env=self.env,
                             capture_output=True, text=True, timeout=30)
        return run.stdout

    def keys(self, *keys: str, pause_s: float = 0.4) -> None:
        """Send keys one by one (tmux key names: Escape, Enter, Tab, C-x; or literal text), pausing after each
        so an editor never reads Escape followed by a key as one Alt chord."""
        for key in keys:
            self._tmux("send-keys", "-t", "editor", key)
            time.sleep(pause_s)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "editor")

    def close(self) -> None:
        self._tmux("kill-server")
