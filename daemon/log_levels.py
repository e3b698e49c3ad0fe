"""Log levels: the standard ones, and NOTICE between info and warning (as in syslog) for what a user of the daemon
should see without anything being wrong: its start, readiness and shutdown, and a slow first-run measurement."""

from __future__ import annotations

import logging

NOTICE = 25
logging.addLevelName(NOTICE, "NOTICE")
LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "notice": NOTICE, "warning": logging.WARNING,
              "error": logging.ERROR}
