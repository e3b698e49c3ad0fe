"""Assemble a ready-to-run engine from the user's choices: target model, drafter (an EAGLE head or a smaller
draft model), device, dtype."""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import torch

from .context.syntax import Region
from .log_levels import NOTICE
from .modes import MODES
from .models.eagle_head import EagleHead, head_from_target, load_head
from .models.default_model import EMBEDDED_MODELS
from .models.errors import HeadLoadError, ModelLoadError
from .models.packed_linear import pack_linears, packing_pays
from .models.row_invariance import attention_geometry, load_or_check, run_one_rows_as_two
from .models.target import TargetModel, load_target
from .policy.cost_model import CostProfile, file_stamp, load_or_measure, measured_busy, profile_path, reload_into
from .policy.gate import DraftGate, GatedDrafter
from .policy.shapes import REGION_SHAPES, ShapeTable, shaped_budget
from .policy.sizing import LatencySizer
from .speculative.drafter import NoDrafter, TreeBudget
from .speculative.eagle_drafter import EagleDrafter
from .speculative.engine import SpeculativeEngine
from .speculative.lookup_drafter import LookupDrafter, MergedDrafter, confident_match, head_pays, model_pays
from .speculative.model_drafter import ModelDrafter

log = logging.getLogger(__name__)

SHIPPED_HEADS_DIR = Path(__file__).parent / "models" / "heads"
MAX_TREE_NODES = 128  # upper bound for latency-aware sizing
DRAFT_MODEL = "model:"  # --head model:SPEC drafts with another model (any --model SPEC) sharing the tokenizer
GATED_MODES = ("eagle-latency", "eagle-syntax", "spec")  # the modes that know the device's costs
PROFILE_RELOAD_S = 5.0  # how often a running daemon looks for a cost profile `nestling profile` wrote meanwhile


def shipped_head_for(model_name: str) -> Path | None:
    """The head folder shipped with nestling for an embedded model, if there is one."""
    folder = SHIPPED_HEADS_DIR / model_name
    return folder if (folder / "config.json").is_file() else None


@dataclass
class Runtime:
    target: TargetModel
    head: EagleHead | None  # the EAGLE head that drafts trees (None: a draft model does, or no tree drafting)
    head_source: str  # a path, "untrained", "none" or "model:NAME"
    budget: TreeBudget  # the tree budget of eagle-ref (the reference EAGLE-2 defaults unless overridden)
    static_buckets: tuple[int, ...] = ()  # static shapes: verified trees padded up to these sizes (GPU option)
    draft_gate: bool = True  # latency-aware modes stop drafting while it loses on this device (policy/gate.py)
    draft_model: TargetModel | None = None  # a smaller model over the same tokens that drafts trees instead of a head
    show_progress: bool = False  # a progress bar on stderr while the cost profile is first measured (a terminal's)
    _profile: CostProfile | None = None  # measured verification cost, loaded on first use
    _profile_stamp: int | None = None  # when its cached file was written, as last read (ns; None: no file)
    _profile_looked: float = 0.0  # time.monotonic() when the file was last looked at

    @property
    def tree_source(self) -> EagleHead | TargetModel | None:
        """What drafts the trees of the eagle-* and spec modes: the draft model, else the head (None: neither)."""
        return self.draft_model if self.draft_model is not None else self.head

    @property
    def max_tree_nodes(self) -> int:
        """The most draft nodes the latency-aware modes verify: with exact rows, a tree and its root fit in them."""
        rows = self.target.exact_rows
        return min(MAX_TREE_NODES, rows - 1) if rows else MAX_TREE_NODES

    @property
    def profile(self) -> CostProfile:
        """The cost profile, measured or read on first use; re-read in place when `nestling profile` has written a
        new one since (looked for at most every PROFILE_RELOAD_S)."""
        if self._profile is None:
            self._profile = load_or_measure(self.target, self.tree_source, show_progress=self.show_progress)
            self._profile_stamp, self._profile_looked = file_stamp(self._profile.key), time.monotonic()
        elif time.monotonic() - self._profile_looked >= PROFILE_RELOAD_S:
            self._look_for_new_profile()
        return self._profile

    def _look_for_new_profile(self) -> None:
        self._profile_looked = time.monotonic()
        stamp = file_stamp(self._profile.key)
        if stamp is None or stamp == self._profile_stamp:
            return
        self._profile_stamp = stamp  # read once, whatever it holds: a bad file is not retried every step
        if reload_into(self._profile):
            log.log(NOTICE, "read the cost profile timed at %s (a verify forward %.0f ms for one token, %.0f ms "
                    "for 16)", self._profile.measured.get("at", "?"), self._profile.verify_cost(1),
                    self._profile.verify_cost(16))
        else:
            log.warning("the cost profile at %s could not be read: keeping the one in use",
                        profile_path(self._profile.key))

    def profile_summary(self) -> dict | None:
        """The cost profile in a few numbers, a newer file taken first (None until it has been timed or read: never
        measures)."""
        if self._profile is None:
            return None
        profile = self.profile
        return {"verify_one_ms": profile.verify_cost(1), "verify_16_ms": profile.verify_cost(16),
                "draft_step_ms": profile.draft_step_ms, "measured_at": profile.measured.get("at", ""),
                "cached": not measured_busy(profile)}

    def _check(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} (use one of {', '.join(MODES)})")
        if mode.startswith("eagle") and self.tree_source is None:
            raise ValueError(f"mode {mode} needs a draft head or draft model (--head)")

    def tree_drafter(self) -> Callable[[], EagleDrafter | ModelDrafter] | None:
        """Makes the drafter of dynamic trees (one per sequence), or None without a head or draft model."""
        source = self.tree_source
        if source is None:
            return None
        return (lambda: ModelDrafter(source)) if isinstance(source, TargetModel) else (lambda: EagleDrafter(source))

    def engine(self, mode: str = "spec") -> SpeculativeEngine:
        """An engine whose drafter implements `mode`; pair it with budget(mode, region) per request."""
        self._check(mode)
        rows = self.target.exact_rows
        if mode == "eagle-ref" and rows and self.budget.total_tokens + 1 > rows:
            log.warning("eagle-ref verifies %d-token trees, more than the %d this CPU verifies with plain decoding's "
                        "bits: its bfloat16 output may part from plain decoding at near-ties (the latency-aware modes "
                        "keep their trees within %d)", self.budget.total_tokens + 1, rows, rows)
        tree = self.tree_drafter()
        if mode == "ar":
            factory = NoDrafter
        elif mode == "lookup" or (mode == "spec" and tree is None):
            factory = LookupDrafter
        elif mode == "spec":
            pays = model_pays if self.draft_model is not None else head_pays
            factory = lambda: MergedDrafter(tree(), LookupDrafter(), pays)  # noqa: E731
        else:
            factory = tree
        if self.draft_gate and mode in GATED_MODES and tree is not None:
            factory = gated(factory, NoDrafter, sure_to_pay=confident_match if mode == "spec" else None,
                            plain_share=self.profile.plain_share)
        return SpeculativeEngine(self.target, factory, self.budget_for(mode, Region.NEUTRAL))

    def budget_for(self, mode: str, region: Region = Region.NEUTRAL, shapes: ShapeTable | None = None) -> TreeBudget:
        """The tree budget of `mode` for a cursor in `region` (padded to static shapes when configured); `shapes`:
        the syntax-shaped modes' table (default REGION_SHAPES; `nestling bench --shape-variants` measures others)."""
        budget = self._budget_for(mode, region, shapes or REGION_SHAPES)
        return replace(budget, buckets=self.static_buckets) if self.static_buckets and mode != "ar" else budget

    def _budget_for(self, mode: str, region: Region, shapes: ShapeTable) -> TreeBudget:
        self._check(mode)
        if mode in ("ar", "eagle-ref"):
            return self.budget
        if mode == "lookup":
            return TreeBudget(total_tokens=10)
        nodes = self.max_tree_nodes
        sizer = LatencySizer(self.profile, nodes)
        if mode == "eagle-latency":
            return TreeBudget(top_k=self.budget.top_k, depth=self.budget.depth, total_tokens=nodes, sizer=sizer)
        return shaped_budget(region, sizer, nodes, shapes)

    def describe(self) -> dict:
        return {
            "model": self.target.name,
            "device": str(self.target.device),
            "dtype": str(self.target.dtype).removeprefix("torch."),
            "head": self.head_source,
            "exact_rows": self.target.exact_rows,  # trees of up to this many tokens get plain decoding's bits
            "packed_weights": self.target.packed_weights,
        }

    def summary(self) -> str:
        """describe() in words, for logs and command output."""
        info = self.describe()
        packed = ", packed weights" if info["packed_weights"] else ""
        exact = f"; exact trees up to {info['exact_rows']} tokens" if info["exact_rows"] else ""
        return f"{info['model']} on {info['device']} ({info['dtype']}{packed}); head {info['head']}{exact}"


def gated(*factories, sure_to_pay=None, plain_share=None) -> Callable[[], GatedDrafter]:
    """Drafters whose arms come from `factories` (richest first, plain decoding last), behind one gate shared by
    every sequence of the engine: same device, same model, so what one request measured holds for the next."""
    gate = DraftGate(len(factories))
    return lambda: GatedDrafter([factory() for factory in factories], gate, sure_to_pay=sure_to_pay,
                                plain_share=plain_share)


def resolve_head(target: TargetModel, head: str | None, progress: bool = True
                 ) -> tuple[EagleHead | TargetModel | None, str]:
    """--head: a folder, 'untrained', 'none', 'model:SPEC' (a draft model), or None: the head shipped for the
    model, else the smaller embedded model that drafts for it, else an untrained head."""
    if head == "none":
        return None, "none"
    if head == "untrained":
        return head_from_target(target), "untrained"
    if head is not None and head.startswith(DRAFT_MODEL):
        return load_draft_model(target, head.removeprefix(DRAFT_MODEL), progress), head
    if head is not None:
        return load_head(head, target), str(Path(head).expanduser())
    shipped = shipped_head_for(target.name)
    sibling = getattr(EMBEDDED_MODELS.get(target.name), "draft_model", None)
    if shipped is not None:
        try:
            return load_head(shipped, target), str(shipped)
        except HeadLoadError as exc:
            log.warning("the shipped head could not be loaded (%s); using an untrained head", exc)
    elif sibling is not None:
        try:
            return load_draft_model(target, sibling, progress), DRAFT_MODEL + sibling
        except ModelLoadError as exc:
            log.warning("the draft model %s could not be loaded (%s); using an untrained head", sibling, exc)
    else:
        log.warning("no trained head for model %s: speculative decoding will gain little; "
                    "train one with `nestling train-head`", target.name)
    return head_from_target(target), "untrained"


def load_draft_model(target: TargetModel, spec: str, progress: bool = True) -> TargetModel:
    """A model (any --model SPEC) that drafts for `target` on its device and in its dtype: it must write the same
    tokens, so it must have the target's tokenizer and no token id the target lacks."""
    if not spec:
        raise ModelLoadError("--head model:SPEC needs a model after 'model:' (an embedded name, folder or .gguf)", "head")
    named = f"--head {DRAFT_MODEL + spec!r}"
    try:
        draft = load_target(spec, device=str(target.device), dtype=str(target.dtype).removeprefix("torch."),
                            progress=progress, named=named)
    except ModelLoadError as exc:  # (a folder's errors name the folder alone: say which flag gave it)
        raise ModelLoadError(str(exc) if str(exc).startswith(named) else f"{named}: {exc}", "head") from exc
    if draft.config.vocab_size > target.config.vocab_size:
        raise ModelLoadError(f"draft model {draft.name}: {draft.config.vocab_size} token ids, more than the "
                             f"{target.config.vocab_size} of {target.name}", "head")
    if target.tokenizer is not None and draft.tokenizer is not None and \
            target.tokenizer.get_vocab() != draft.tokenizer.get_vocab():
        raise ModelLoadError(f"draft model {draft.name} does not share the tokenizer of {target.name}", "head")
    return draft


def pack_weights(target: TargetModel, head: EagleHead | None, draft_model: TargetModel | None = None) -> bool:
    """Pack the target's, the head's and the draft model's matrices for oneDNN when that gives the same bits faster
    on this CPU (models/packed_linear.py; measured on each model's lm_head). After the head is attached: it reads
    the lm_head. Returns whether the target's are packed."""
    if not target.packed_weights and packing_pays(target.lm_head.weight):
        pack_linears(target.model)
        if head is not None:
            head.pack_for_inference()
        target.packed_weights = True
        log.info("weights packed for oneDNN: same results, faster on this CPU "
                 "(packed_weights = false keeps torch's layout)")
    if draft_model is not None and not draft_model.packed_weights and packing_pays(draft_model.lm_head.weight):
        pack_linears(draft_model.model)
        draft_model.packed_weights = True
    return target.packed_weights


def use_exact_rows(target: TargetModel) -> int:
    """Make verify forwards give each tree node plain decoding's bits where this CPU's products allow it (bfloat16
    and float16 on a CPU; not float32, whose products are not row-invariant but far from flipping an argmax, nor
    GPUs): checks the target's own matrices (models/row_invariance.py; the verdict is kept on disk), then computes
    attention row by row for forwards of up to that many tokens. The latency-aware trees are then capped to fit
    (Runtime.max_tree_nodes). Returns the rows (0: not used)."""
    if target.device.type != "cpu" or target.dtype == torch.float32:
        return 0
    verdict = load_or_check(target.model, target.dtype, target.device, attention_geometry(target.config))
    if verdict.rows < 2:
        log.info("trees are not verified exactly on this CPU: its matrix products round a row differently "
                 "when other rows go with it")
        return 0
    target.use_exact_rows(verdict.rows, fold=verdict.fold)
    if not target.exact_rows:
        return 0
    if verdict.two_row:
        run_one_rows_as_two(target.model, verdict.two_row)
        log.info("one-row products of the %s matrices run as two rows: this CPU's one-row kernel rounds them "
                 "differently from its block kernel", ", ".join(f"{o}x{i}" for o, i in verdict.two_row))
    log.info("trees of up to %d tokens verify with plain decoding's bits (exact_trees = false turns it off)",
             target.exact_rows)
    return target.exact_rows


STATIC_BUCKETS = (16, 32, 64, 128)  # tree sizes (root included) of the static-shape option


def load_runtime(model: str | None = None, head: str | None = None, device: str | None = None,
                 dtype: str | None = None, budget: TreeBudget | None = None, progress: bool = True,
                 static_shapes: bool = False, draft_gate: bool = True, packed_weights: bool = True,
                 exact_trees: bool = True) -> Runtime:
    target = load_target(model, device=device, dtype=dtype, progress=progress)
    drafter, source = resolve_head(target, head, progress)
    draft_model = drafter if isinstance(drafter, TargetModel) else None
    eagle_head = None if draft_model is not None else drafter
    if packed_weights:
        pack_weights(target, eagle_head, draft_model)
    if exact_trees:
        use_exact_rows(target)
    return Runtime(target=target, head=eagle_head, head_source=source, draft_model=draft_model,
                   budget=budget or TreeBudget(),
                   static_buckets=STATIC_BUCKETS if static_shapes else (), draft_gate=draft_gate,
                   show_progress=progress and sys.stderr.isatty())  # not into a daemon's log
