"""Errors raised while locating, converting or loading models and heads.

Every message names the file (or package) at fault and what was wrong with it, so a user can act on it.
"""


class ModelLoadError(RuntimeError):
    """A target model could not be located, verified, converted or loaded."""


class HeadLoadError(ModelLoadError):
    """An EAGLE head checkpoint is missing, corrupt, or does not fit the target model."""
