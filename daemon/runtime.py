"""Assemble a ready-to-run engine from the user's choices: target model, draft head, device, dtype."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable


from .context.syntax import Region
from .modes import MODES
from .models.eagle_head import EagleHead, head_from_target, load_head
from .models.errors import HeadLoadError
from .models.packed_linear import pack_linears, packing_pays
from .models.target import TargetModel, load_target
from .policy.cost_model import CostProfile, load_or_measure
from .policy.gate import DraftGate, GatedDrafter
from .policy.shapes import shaped_budget
from .policy.sizing import LatencySizer
from .speculative.drafter import NoDrafter, TreeBudget
from .speculative.eagle_drafter import EagleDrafter
from .speculative.engine import SpeculativeEngine
from .speculative.lookup_drafter import LookupDrafter, MergedDrafter, confident_match

log = logging.getLogger(__name__)

SHIPPED_HEADS_DIR = Path(__file__).parent / "models" / "heads"
MAX_TREE_NODES = 128  # upper bound for latency-aware sizing
GATED_MODES = ("eagle-latency", "eagle-syntax", "spec")  # the modes that know the device's costs


def shipped_head_for(model_name: str) -> Path | None:
    """The head folder shipped with nestling for an embedded model, if there is one."""
    folder = SHIPPED_HEADS_DIR / model_name
    return folder if (folder / "config.json").is_file() else None


@dataclass
class Runtime:
    target: TargetModel
    head: EagleHead | None  # None: no EAGLE drafting (lookup and autoregressive only)
    head_source: str  # a path, "untrained" or "none"
    budget: TreeBudget  # the tree budget of eagle-ref (the reference EAGLE-2 defaults unless overridden)
    static_buckets: tuple[int, ...] = ()  # static shapes: verified trees padded up to these sizes (GPU option)
    draft_gate: bool = True  # latency-aware modes stop drafting while it loses on this device (policy/gate.py)
    _profile: CostProfile | None = None  # measured verification cost, loaded on first use

    @property
    def profile(self) -> CostProfile:
        if self._profile is None:
            log.info("measuring the verification cost on this device (once per model and device)")
            self._profile = load_or_measure(self.target, self.head)
        return self._profile

    def _check(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} (use one of {', '.join(MODES)})")
        if mode.startswith("eagle") and self.head is None:
            raise ValueError(f"mode {mode} needs a draft head (--head)")

    def engine(self, mode: str = "spec") -> SpeculativeEngine:
        """An engine whose drafter implements `mode`; pair it with budget(mode, region) per request."""
        self._check(mode)
        head = self.head
        if mode == "ar":
            factory = NoDrafter
        elif mode == "lookup" or (mode == "spec" and head is None):
            factory = LookupDrafter
        elif mode == "spec":
            factory = lambda: MergedDrafter(EagleDrafter(head), LookupDrafter())  # noqa: E731
        else:
            factory = lambda: EagleDrafter(head)  # noqa: E731
        if self.draft_gate and mode in GATED_MODES and head is not None:
            factory = gated(factory, NoDrafter, sure_to_pay=confident_match if mode == "spec" else None,
                            plain_share=self.profile.plain_share)
        return SpeculativeEngine(self.target, factory, self.budget_for(mode, Region.NEUTRAL))

    def budget_for(self, mode: str, region: Region = Region.NEUTRAL) -> TreeBudget:
        """The tree budget of `mode` for a cursor in `region` (padded to static shapes when configured)."""
        budget = self._budget_for(mode, region)
        return replace(budget, buckets=self.static_buckets) if self.static_buckets and mode != "ar" else budget

    def _budget_for(self, mode: str, region: Region) -> TreeBudget:
        self._check(mode)
        if mode in ("ar", "eagle-ref"):
            return self.budget
        if mode == "lookup":
            return TreeBudget(total_tokens=10)
        sizer = LatencySizer(self.profile, MAX_TREE_NODES)
        if mode == "eagle-latency":
            return TreeBudget(top_k=self.budget.top_k, depth=self.budget.depth, total_tokens=MAX_TREE_NODES,
                              sizer=sizer)
        return shaped_budget(region, sizer, MAX_TREE_NODES)

    def describe(self) -> dict:
        return {
            "model": self.target.name,
            "device": str(self.target.device),
            "dtype": str(self.target.dtype).removeprefix("torch."),
            "head": self.head_source,
        }


def gated(*factories, sure_to_pay=None, plain_share=None) -> Callable[[], GatedDrafter]:
    """Drafters whose arms come from `factories` (richest first, plain decoding last), behind one gate shared by
    every sequence of the engine: same device, same model, so what one request measured holds for the next."""
    gate = DraftGate(len(factories))
    return lambda: GatedDrafter([factory() for factory in factories], gate, sure_to_pay=sure_to_pay,
                                plain_share=plain_share)


def resolve_head(target: TargetModel, head: str | None) -> tuple[EagleHead | None, str]:
    """--head: a folder, 'none', or None for the shipped head of the model (an untrained one if none ships)."""
    if head == "none":
        return None, "none"
    if head == "untrained":
        return head_from_target(target), "untrained"
    if head is not None:
        return load_head(head, target), str(Path(head).expanduser())
    shipped = shipped_head_for(target.name)
    if shipped is not None:
        try:
            return load_head(shipped, target), str(shipped)
        except HeadLoadError as exc:
            log.warning("the shipped head could not be loaded (%s); using an untrained head", exc)
    else:
        log.warning("no trained head for model %s: speculative decoding will gain little; "
                    "train one with `nestling train-head`", target.name)
    return head_from_target(target), "untrained"


def pack_weights(target: TargetModel, head: EagleHead | None) -> bool:
    """Pack the target's and the head's matrices for oneDNN when that gives the same bits faster on this CPU
    (models/packed_linear.py; measured on the lm_head). After the head is attached: it reads the lm_head."""
    if not target.packed_weights and packing_pays(target.lm_head.weight):
        pack_linears(target.model)
        if head is not None:
            head.pack_for_inference()
        target.packed_weights = True
        log.info("weights packed for oneDNN: same results, faster on this CPU "
                 "(packed_weights = false keeps torch's layout)")
    return target.packed_weights


STATIC_BUCKETS = (16, 32, 64, 128)  # tree sizes (root included) of the static-shape option


def load_runtime(model: str | None = None, head: str | None = None, device: str | None = None,
                 dtype: str | None = None, budget: TreeBudget | None = None, progress: bool = True,
                 static_shapes: bool = False, draft_gate: bool = True, packed_weights: bool = True) -> Runtime:
    target = load_target(model, device=device, dtype=dtype, progress=progress)
    drafter_head, source = resolve_head(target, head)
    if packed_weights:
        pack_weights(target, drafter_head)
    return Runtime(target=target, head=drafter_head, head_source=source, budget=budget or TreeBudget(),
                   static_buckets=STATIC_BUCKETS if static_shapes else (), draft_gate=draft_gate)
