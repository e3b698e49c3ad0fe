import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from scratch import scratch_folder  # noqa: E402  (found through the path above)

torch.set_num_threads(min(2, os.cpu_count() or 1))

# Tests never write to the user's cache. NESTLING_TEST_CACHE names a cache to share across runs (CI sets
# it so the default model is converted once); otherwise each run gets a fresh temporary one.
os.environ["NESTLING_CACHE_DIR"] = os.environ.get("NESTLING_TEST_CACHE") or str(scratch_folder("nestling-test-"))
# nor read the user's config file: an empty one (the defaults), which commands and daemons the tests start inherit
EMPTY_CONFIG = scratch_folder("nestling-config-") / "config.toml"
EMPTY_CONFIG.write_text("")
os.environ["NESTLING_CONFIG"] = str(EMPTY_CONFIG)
