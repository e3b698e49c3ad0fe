"""A cancel event for tests that stop work part way, at a known check."""


class CancelAfter:
    """An event that reads as set from its `checks`+1-th look on (a newer request arriving mid-work)."""

    def __init__(self, checks: int):
        self.checks = checks

    def is_set(self) -> bool:
        self.checks -= 1
        return self.checks < 0
