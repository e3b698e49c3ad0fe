"""Temporary folders for a test run, removed when the run ends (nothing is left behind in /tmp)."""

import atexit
import shutil
import tempfile
from pathlib import Path


def scratch_folder(prefix: str) -> Path:
    """A fresh folder under the system's temporary directory, removed when the interpreter exits."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder
