"""Waiting on processes the tests start (daemons under `nestling serve --detach`)."""

from __future__ import annotations

import os
import time


def wait_for_exit(pid: int, timeout_s: float = 10.0) -> bool:
    """True once process `pid` is gone, False if it is still running after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False
