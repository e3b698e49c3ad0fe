import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_committed_stubs_match_the_proto():
    pytest.importorskip("grpc_tools")
    result = subprocess.run([sys.executable, str(ROOT / "proto" / "generate.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_message_field_is_documented():
    """A field is documented by a comment right above it, or above the run of fields it belongs to."""
    lines = [line.strip() for line in (ROOT / "proto" / "completion.proto").read_text().splitlines()]
    in_message, undocumented = False, []
    for index, line in enumerate(lines):
        if line.startswith("message "):
            in_message = True
        elif line == "}":
            in_message = False
        elif in_message and line.endswith(";") and "=" in line and "//" not in line:
            above = index - 1
            while lines[above].endswith(";") and "=" in lines[above] and not lines[above].startswith("//"):
                above -= 1  # a run of fields shares the comment above it
            if not lines[above].startswith("//"):
                undocumented.append(line)
    assert not undocumented, undocumented
