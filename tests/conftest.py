import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
torch.set_num_threads(min(2, os.cpu_count() or 1))


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Tests never write to the user's cache, except the e2e ones which share one converted default model."""
    if "NESTLING_TEST_CACHE" in os.environ:
        monkeypatch.setenv("NESTLING_CACHE_DIR", os.environ["NESTLING_TEST_CACHE"])
    else:
        monkeypatch.setenv("NESTLING_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
