"""Errors raised while locating, converting or loading models and heads.

Every message names the file (or package) at fault and what was wrong with it, so a user can act on it.
"""

import warnings
from contextlib import contextmanager


class ModelLoadError(RuntimeError):
    """A target model could not be located, verified, converted or loaded. `setting`: the setting (and flag) it is
    about, for messages that name where that was set (`nestling serve` names the config file's line)."""

    setting = "model"

    def __init__(self, message: str, setting: str | None = None):
        super().__init__(message)
        if setting is not None:
            self.setting = setting


class HeadLoadError(ModelLoadError):
    """An EAGLE head checkpoint is missing, corrupt, or does not fit the target model."""

    setting = "head"


@contextmanager
def quiet_transformers():
    """transformers' warnings held back (not printed raw to a user's terminal) where nestling checks what they are
    about itself and says it with errors that name the file: a head's config, a model's missing weights."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():  # torch's, on a .bin file saved by another pickle version: no matter here
            warnings.filterwarnings("ignore", message=".*pickle protocol.*")
            yield
    finally:
        hf_logging.set_verbosity(verbosity)


def short_reason(exc: Exception, limit: int = 200) -> str:
    """An exception's reason for an error message, short: its type and first line (torch's and transformers' run
    on for paragraphs and lists)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
