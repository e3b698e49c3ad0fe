"""The measured cost of verification and drafting on this device: T_verify(W) and T_draft per step.

Measured once per (model, device, dtype, library versions, drafter) at a realistic context length and
cached on disk; `nestling profile` re-measures and plots it. Verification is nearly flat up to a few
dozen tokens on a CPU and differs on a GPU, so the tree size must come from this curve.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from ..log_levels import NOTICE
from ..models import attention
from ..models.kv_cache import new_cache, truncate
from ..models.target import TargetModel, cpu_features, cpu_name, kernel_settings
from ..models.paths import checked_cache_dir, replacing
from ..speculative.drafter import DraftInput, TreeBudget
from ..speculative.masks import block_mask
from ..speculative.stats import Clock

VERIFY_SIZES = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128)
VERIFY_REPEATS = 7  # timed rounds of every size (and of the draft step); the median is kept
METHOD = "interleaved-isotonic, native-dtype logits"  # how the curve is measured; in the cache key: re-measures
# a profile measured while other processes took more than this share of our CPUs is used but not kept: with both
# cores of a 2-core CPU busy elsewhere, a tiny model's 2-token forward measured 13x its 1-token one, and no tree paid
BUSY_ELSEWHERE_LIMIT = 0.25
# after the curve, a short second pass re-times a few sizes; when it disagrees with the curve in shape (one size
# slower than the others by more than CHECK_SPREAD), the curve is measured again. On the Zen 4, 8 curves in a row from
# one idle process disagreed with their 7-round checks by 7-16% (a one-token forward's median moves 56-74 ms between
# passes there), so the limit is set above that noise: it catches a pass timed in another state, not the noise
CHECK_SIZES = (1, 8, 16)
CHECK_REPEATS = VERIFY_REPEATS  # as many rounds as the curve: the noise above was measured so
CHECK_SPREAD = 1.25
MEASURE_ATTEMPTS = 3  # curves measured at most, when their checks keep disagreeing

log = logging.getLogger(__name__)


@dataclass
class CostProfile:
    key: str  # what the measurement is valid for (model, device, dtype, versions, head)
    context_tokens: int  # committed tokens in the cache while measuring
    verify_ms: dict[int, float]  # W tree tokens (root included) -> ms of one verify forward (medians, made non-decreasing)
    draft_step_ms: float  # median ms of one draft step (head or draft model) over top_k frontier nodes + its top-k
    measured: dict = field(default_factory=dict)  # device/dtype/versions, for the record

    def verify_cost(self, size: int) -> float:
        """T_verify for `size` tokens, interpolated linearly between measured sizes."""
        points = sorted(self.verify_ms.items())
        if size <= points[0][0]:
            return points[0][1]
        for (w0, t0), (w1, t1) in zip(points, points[1:]):
            if size <= w1:
                return t0 + (t1 - t0) * (size - w0) / (w1 - w0)
        (w0, t0), (w1, t1) = points[-2], points[-1]
        return t1 + (t1 - t0) / (w1 - w0) * (size - w1)

    def plain_share(self, size: int) -> float:
        """What a one-token forward costs as a share of a verify forward over `size` tree tokens."""
        return self.verify_cost(1) / self.verify_cost(size)

    def save(self, path: Path) -> None:
        """Written in one rename (a full disk leaves the old file whole, not an empty one); OSError naming the path."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with replacing(path) as temporary:
                temporary.write_text(json.dumps(asdict(self), indent=2))
        except OSError as exc:
            raise OSError(f"cannot write the cost profile {path}: {exc.strerror or exc}") from None

    @classmethod
    def load(cls, path: Path) -> "CostProfile":
        """The profile in `path`; ValueError where it holds no usable curve (QA: a string, an empty curve, a null draft
        step or zeros in a hand-edited file failed every completion; NaN or negative times gave trees of one node)."""
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("verify_ms"), dict):
            raise ValueError("no verify_ms table")
        data["verify_ms"] = {int(k): _milliseconds(v, f"verify_ms[{k}]") for k, v in data["verify_ms"].items()}
        if len(data["verify_ms"]) < 2 or min(data["verify_ms"]) != 1:
            raise ValueError("verify_ms needs one token's time and at least one more size")
        data["draft_step_ms"] = _milliseconds(data.get("draft_step_ms"), "draft_step_ms", zero=True)
        if not isinstance(data.get("key"), str) or not isinstance(data.get("measured", {}), dict):
            raise ValueError("key or measured of the wrong type")
        return cls(**data)

    @classmethod
    def read(cls, path: Path) -> "CostProfile | None":
        """The profile cached at `path`, or None where there is none or it cannot be read (corrupt, old layout: said
        in a log line)."""
        try:
            return cls.load(path)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("the cost profile %s cannot be used: %s", path, exc)
            return None


def _milliseconds(value, name: str, zero: bool = False) -> float:
    """`value` as a time in ms: a finite number above 0 (or 0 where `zero`); ValueError naming it otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or \
            value < 0 or (value == 0 and not zero):
        raise ValueError(f"{name} is {value!r}, not a time in ms")
    return float(value)


def profile_key(target, head) -> str:
    """`head`: the tree drafter's model, an EagleHead or a draft TargetModel (or None)."""
    import transformers

    if target.device.type == "cuda":
        device = torch.cuda.get_device_name(target.device)
    else:
        device = cpu_name() + " " + ",".join(cpu_features())
    parts = [target.name, str(target.device.type), device, str(target.dtype), torch.__version__, transformers.__version__,
             str(torch.get_num_threads()), str(getattr(head, "draft_vocab_size", 0)), METHOD,
             "packed" if getattr(target, "packed_weights", False) else "unpacked", *kernel_settings()]
    if getattr(target, "exact_rows", 0):  # attention computed row by row: another curve
        parts.append(f"exact rows {target.exact_rows}" + (", folded" if getattr(target, "exact_fold", False) else "")
                     + f", revision {attention.EXACT_ATTENTION_REVISION}")
    if isinstance(head, TargetModel):  # a draft model: its own name and layout set the draft step's cost
        from ..speculative.model_drafter import MODEL_WIDTH

        parts += ["draft model", head.name, "packed" if head.packed_weights else "unpacked", f"width {MODEL_WIDTH}"]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


@dataclass
class CpuSnapshot:
    wall_s: float  # a monotonic clock
    cpus_busy_s: float | None  # CPU seconds all processes spent on our CPUs since boot (None: unknown here)
    own_s: float  # CPU seconds this process spent
    cpus: int  # the CPUs this process may run on


def cpu_snapshot() -> CpuSnapshot:
    """Where CPU time went so far (Linux's /proc/stat; elsewhere only this process's share is known)."""
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))
    busy = None
    try:
        ticks = os.sysconf("SC_CLK_TCK")
        with open("/proc/stat") as stat:
            busy = 0.0
            for line in stat:
                name, *fields = line.split()
                if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in allowed:
                    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
                    busy += (user + nice + system + irq + softirq + steal) / ticks
    except (OSError, ValueError):
        busy = None
    own = os.times()
    return CpuSnapshot(time.monotonic(), busy, own.user + own.system, len(allowed))


def busy_elsewhere(before: CpuSnapshot, after: CpuSnapshot) -> float | None:
    """The share of our CPUs' time that other processes used between two snapshots (None: unknown)."""
    wall = after.wall_s - before.wall_s
    if before.cpus_busy_s is None or after.cpus_busy_s is None or wall <= 0:
        return None
    others = (after.cpus_busy_s - before.cpus_busy_s) - (after.own_s - before.own_s)
    return min(1.0, max(0.0, others / (wall * after.cpus)))


def profile_path(key: str) -> Path:
    return checked_cache_dir() / "profiles" / f"{key}.json"


def non_decreasing(values: list[float]) -> list[float]:
    """The least-squares non-decreasing fit (pool adjacent violators). Verifying more tokens does more work,
    so a dip in the measured medians is noise; left in, it would make a bigger tree look cheaper."""
    blocks: list[list[float]] = []  # [mean, count]
    for value in values:
        blocks.append([value, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m1, c1), (m2, c2) = blocks[-2], blocks.pop()
            blocks[-1] = [(m1 * c1 + m2 * c2) / (c1 + c2), c1 + c2]
    return [mean for mean, count in blocks for _ in range(count)]


def _median_ms(fn, repeats: int, clock: Clock) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = clock.now()
        fn()
        times.append(clock.now() - start)
    return statistics.median(times)


def verify_medians(target, context: torch.Tensor, sizes, repeats: int, clock: Clock, progress=None) -> list[float]:
    """Median ms of a verify forward over W chain tokens after `context` [1, C], for each W in `sizes`."""
    context_tokens = context.shape[1]
    generator = torch.Generator().manual_seed(1)
    cache = new_cache(target.config)
    target.forward(context, torch.arange(context_tokens, device=target.device)[None], cache, logits_for=slice(-1, None))

    def timed_verify(size: int) -> float:
        ids = torch.randint(0, min(target.config.vocab_size, 30000), (1, size), generator=generator).to(target.device)
        positions = torch.arange(context_tokens, context_tokens + size, device=target.device)[None]
        allowed = torch.ones((size, size), dtype=torch.bool, device=target.device).tril()
        mask = block_mask(allowed, context_tokens, target.dtype) if size > 1 else None
        start = clock.now()
        target.forward(ids, positions, cache, attention_mask=mask)
        elapsed = clock.now() - start
        truncate(cache, context_tokens)
        return elapsed

    for size in sizes:  # warm-up
        timed_verify(size)
    # rounds over all sizes, so a burst of load from elsewhere hits every size alike
    samples: dict[int, list[float]] = {size: [] for size in sizes}
    for _ in range(repeats):
        for size in sizes:
            samples[size].append(timed_verify(size))
        if progress:
            progress(len(sizes))
    return [statistics.median(samples[size]) for size in sizes]


def _draft_step_ms(target, head, context: torch.Tensor, top_k: int, repeats: int, clock: Clock) -> float:
    """Median ms of one expansion over top_k frontier nodes by `head` (an EagleHead or a draft TargetModel): a
    depth-2 draft minus a depth-1 draft, so taking in the committed tokens is not counted."""
    from ..speculative.eagle_drafter import EagleDrafter
    from ..speculative.model_drafter import ModelDrafter

    drafter = ModelDrafter(head) if isinstance(head, TargetModel) else EagleDrafter(head)
    pairs = min(64, context.shape[1] - 1)  # committed pairs the head consumes before drafting
    features, _ = target.forward(context[:, :pairs], torch.arange(pairs, device=target.device)[None],
                                 new_cache(target.config), logits_for=slice(-1, None))
    draft_input = DraftInput(tokens=context[0, : pairs + 1], features=features)

    def draft(depth: int) -> None:
        drafter.reset()
        drafter.draft_candidates(draft_input, TreeBudget(top_k=top_k, depth=depth, total_tokens=top_k))

    return max(0.0, _median_ms(lambda: draft(2), repeats, clock) - _median_ms(lambda: draft(1), repeats, clock))


@torch.no_grad()
def measure(target, head, context_tokens: int = 300, sizes=VERIFY_SIZES, repeats: int = VERIFY_REPEATS,
            top_k: int = 10, progress=None) -> CostProfile:
    """Time verify forwards of W chain tokens after a `context_tokens` prefix, and one draft step."""
    import transformers

    clock = Clock(target.device)
    generator = torch.Generator().manual_seed(0)
    context = torch.randint(0, min(target.config.vocab_size, 30000), (1, context_tokens), generator=generator)
    context = context.to(target.device)
    before = cpu_snapshot()
    medians = verify_medians(target, context, sizes, repeats, clock, progress)
    draft_ms = _draft_step_ms(target, head, context, top_k, repeats, clock) if head is not None else 0.0
    check = verify_medians(target, context, CHECK_SIZES, CHECK_REPEATS, clock)
    elsewhere = busy_elsewhere(before, cpu_snapshot())
    return CostProfile(
        key=profile_key(target, head), context_tokens=context_tokens,
        verify_ms={size: round(ms, 3) for size, ms in zip(sizes, non_decreasing(medians))},
        draft_step_ms=round(draft_ms, 3),
        measured={"medians_ms": {size: round(ms, 3) for size, ms in zip(sizes, medians)}, "method": METHOD,
                  "model": target.name, "device": str(target.device), "dtype": str(target.dtype),
                  "packed_weights": getattr(target, "packed_weights", False),
                  "torch": torch.__version__, "transformers": transformers.__version__,
                  "threads": torch.get_num_threads(), "at": time.strftime("%Y-%m-%d %H:%M:%S"),
                  "busy_elsewhere": None if elsewhere is None else round(elsewhere, 3),
                  "check_ms": {size: round(ms, 3) for size, ms in zip(CHECK_SIZES, check)}},
    )


def check_spread(profile: CostProfile) -> float:
    """How far the second pass disagrees with the curve in shape: the largest over the smallest of its sizes'
    ratios check / curve median (1.0: the same shape; a uniformly faster or slower pass also reads 1.0, since the
    tree's size depends on how costs compare). 1.0 when the profile has no check (measured before there was one)."""
    medians, check = profile.measured.get("medians_ms", {}), profile.measured.get("check_ms", {})
    ratios = [ms / float(medians[size]) for size, ms in check.items()
              if size in medians and float(medians[size]) > 0]  # JSON round trips keep the keys as strings
    return max(ratios) / min(ratios) if ratios and min(ratios) > 0 else 1.0


def measure_consistent(target, head, attempts: int = MEASURE_ATTEMPTS, progress=None, on_retry=None,
                       **options) -> CostProfile:
    """measure(), again while the second pass disagrees with the curve (up to `attempts` curves); the most
    consistent one is returned, with its attempt number in profile.measured. `on_retry(attempt)` is called before
    each further curve."""
    tried = []
    for attempt in range(1, attempts + 1):
        if attempt > 1 and on_retry:
            on_retry(attempt)
        profile = measure(target, head, progress=progress, **options)
        tried.append(profile)
        spread = check_spread(profile)
        profile.measured["attempt"] = attempt
        if spread <= CHECK_SPREAD:
            return profile
        log.info("the cost curve's check disagrees with it (one size %.0f%% off the others): measuring again",
                 100 * (spread - 1))
    best = min(tried, key=check_spread)
    log.warning("%d cost curves in a row disagreed with their checks (the best by %.0f%%): the CPU's speed is "
                "changing while it is timed; using the most consistent one (`nestling profile` measures again)",
                attempts, 100 * (check_spread(best) - 1))
    return best


def measure_shown(target, head, show: bool = True, **options) -> CostProfile:
    """measure_consistent() with a progress bar of the curve's verify forwards on stderr (restarted for a further
    curve); `show` False: none."""
    from tqdm import tqdm

    total = options.get("repeats", VERIFY_REPEATS) * len(options.get("sizes", VERIFY_SIZES))
    with tqdm(total=total, desc="verify forwards", unit="forward", disable=not show) as bar:
        def again(attempt: int) -> None:
            bar.reset()
            bar.set_description(f"verify forwards, attempt {attempt} (the check disagreed with the curve)")

        return measure_consistent(target, head, progress=bar.update, on_retry=again, **options)


def load_or_measure(target, head, show_progress: bool = False) -> CostProfile:
    """The cached profile for this target/head/device, measuring it on first use (with a progress bar when
    `show_progress`)."""
    key = profile_key(target, head)
    try:
        path = profile_path(key)
    except OSError as exc:  # (the cache folder's variable names a file)
        log.warning("the cost profile is timed but not kept: %s", exc)
        path = None
    cached = CostProfile.read(path) if path is not None else None
    if cached is not None:
        return cached  # a corrupt one is simply measured again
    log.log(NOTICE, "timing verify forwards and a draft step on this device (once per model, device and library "
            "versions; ~20 s for the default model on a 2-core CPU)")
    profile = measure_shown(target, head, show=show_progress)
    if measured_busy(profile):
        log.warning("other processes kept %.0f%% of the CPU busy while the verification cost was measured: the "
                    "profile is used now but not kept (measured again at the next start; `nestling profile` "
                    "measures it on demand)", 100 * profile.measured["busy_elsewhere"])
    elif path is not None:
        try:
            profile.save(path)
        except OSError as exc:  # (QA: a read-only home or a full disk failed every completion)
            log.warning("%s: the profile is used now and timed again at the next start (NESTLING_CACHE_DIR names "
                        "another cache folder)", exc)
    return profile


def file_stamp(key: str) -> int | None:
    """When the cached profile for `key` was last written (ns; None: there is none)."""
    try:
        return profile_path(key).stat().st_mtime_ns
    except OSError:
        return None


def reload_into(profile: CostProfile) -> bool:
    """Give `profile` the numbers of its cached file in place (one `nestling profile` wrote since it was read), so
    every engine, gate and sizer holding it uses them from its next step. False, and `profile` unchanged, when the
    file is missing, unreadable or for another key."""
    fresh = CostProfile.read(profile_path(profile.key))
    if fresh is None or fresh.key != profile.key or not fresh.verify_ms:
        return False
    vars(profile).update(vars(fresh))  # every field, whatever fields the profile gains
    return True


def measured_busy(profile: CostProfile) -> bool:
    """Whether other processes took more than BUSY_ELSEWHERE_LIMIT of the CPUs while it was measured."""
    return (profile.measured.get("busy_elsewhere") or 0.0) > BUSY_ELSEWHERE_LIMIT
