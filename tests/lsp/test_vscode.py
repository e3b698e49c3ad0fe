"""A real editor as the client: VS Code (code-server; its extension host runs here, as in the desktop app)
with the extension from `editors/vscode`, packaged and installed from its .vsix as the README says, driven
by keystrokes in headless Chromium. `scripts/fetch-vscode.sh` fetches all of it; the test skips without."""

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest

from conftest import EMBEDDED, MODEL_ARGS
from terminal_editor import COLUMN, EDITORS_BIN, LINE, SOURCE, ar_completion, completed, read_text, wait_until

VSCODE = EDITORS_BIN.parent / "vscode"
CODE_SERVER = VSCODE / "code-server" / "node_modules" / ".bin" / "code-server"
CHROMIUM = shutil.which("chromium")
SETTINGS = {"security.workspace.trust.enabled": False, "workbench.startupEditor": "none",
            "telemetry.telemetryLevel": "off", "extensions.autoUpdate": False, "extensions.autoCheckUpdates": False,
            "update.mode": "none"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serving(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5):
            return True
    except OSError:
        return False


def as_displayed(text: str) -> str:
    """Text as VS Code draws it: control characters as their Unicode control pictures (\\x02 -> U+2402). Spaces
    are compared as plain ones: the DOM holds some of the spaces VS Code draws as no-break spaces, and the tiny
    model's text (whatever its random weights make) may hold either."""
    return "".join(chr(0x2400 + ord(c)) if ord(c) < 0x20 and c not in "\t\n" else " " if c == "\xa0" else c
                   for c in text)


@pytest.mark.skipif(not (CODE_SERVER.exists() and (VSCODE / "nestling.vsix").exists() and CHROMIUM),
                    reason="code-server, the packaged extension or Chromium missing (run scripts/fetch-vscode.sh)")
def test_vscode_shows_ghost_text_and_tab_accepts_it(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    source = workspace / "main.py"
    source.write_text(SOURCE)
    expected = ar_completion(MODEL_ARGS, source, LINE, COLUMN)
    # The extension runs `<nestling.command> lsp` (EMBEDDED[:3]: python -m nestling...): the tiny model.
    command = tmp_path / "nestling"
    command.write_text(f'#!/bin/sh\nexec {shlex.join(EMBEDDED[:3])} "$@" --embedded {shlex.join(MODEL_ARGS)}\n')
    command.chmod(0o755)
    data, extensions = tmp_path / "data", tmp_path / "extensions"
    (data / "User").mkdir(parents=True)
    (data / "User" / "settings.json").write_text(json.dumps({**SETTINGS, "nestling.command": str(command)}))
    env = dict(os.environ, HOME=str(tmp_path), PATH=f"{VSCODE / 'bin'}:{os.environ['PATH']}")
    dirs = ["--user-data-dir", str(data), "--extensions-dir", str(extensions)]
    subprocess.run([str(CODE_SERVER), *dirs, "--install-extension", str(VSCODE / "nestling.vsix")], env=env,
                   check=True, capture_output=True, timeout=120)  # Extensions → … → Install from VSIX

    port = free_port()
    server = subprocess.Popen([str(CODE_SERVER), "--auth", "none", "--bind-addr", f"127.0.0.1:{port}", *dirs,
                               "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust",
                               str(workspace)], env=env, cwd=tmp_path, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_until(lambda: serving(url), 60, interval_s=0.5, what="code-server to listen")
        out = tmp_path / "vscode.json"
        client_env = dict(env, NESTLING_CHROMIUM=CHROMIUM, NESTLING_VSCODE_OUT=str(out), NESTLING_FILE=str(source),
                          NESTLING_VSCODE_URL=f"{url}?folder={workspace}",
                          NODE_PATH=str(VSCODE / "playwright" / "node_modules"))
        subprocess.run([str(VSCODE / "bin" / "node"), str(Path(__file__).with_name("vscode_client.js"))],
                       env=client_env, timeout=500, capture_output=True)
        seen = json.loads(out.read_text())
        assert "error" not in seen, seen
        assert seen["ghost"].replace("\xa0", " ") == as_displayed(expected)
        assert seen["attempts"] <= 4, seen  # Tab accepted the ghost text in one of four rounds
        wait_until(lambda: read_text(source) != SOURCE, 30, what="the file to be saved")
        assert read_text(source) == completed(expected)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
