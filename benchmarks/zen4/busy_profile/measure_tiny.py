"""The cost profile of the tests' tiny model, timed as the daemon times it at its first start, with the share of the
CPU that other processes took meanwhile. Run from the repository root, once with the machine idle and once with
both cores busy elsewhere (here: a `nestling train-head` distillation):
`python benchmarks/zen4/busy_profile/measure_tiny.py`."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
from tiny import tiny_target  # noqa: E402

from nestling.daemon.policy import cost_model  # noqa: E402

profile = cost_model.measure(tiny_target(), None)
print(f"busy elsewhere {profile.measured['busy_elsewhere']}, kept {not cost_model.measured_busy(profile)}")
print({tokens: round(ms, 2) for tokens, ms in profile.verify_ms.items()})
