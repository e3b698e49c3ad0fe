"""Assemble a ready-to-run engine from the user's choices: target model, draft head, device, dtype."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from .models.eagle_head import EagleHead, head_config_from_target, load_head
from .models.errors import HeadLoadError
from .models.target import TargetModel, load_target
from .speculative.drafter import NoDrafter, TreeBudget
from .speculative.eagle_drafter import EagleDrafter
from .speculative.engine import SpeculativeEngine

log = logging.getLogger(__name__)

SHIPPED_HEADS_DIR = Path(__file__).parent / "models" / "heads"
MODES = ("ar", "spec")


def shipped_head_for(model_name: str) -> Path | None:
    """The head folder shipped with nestling for an embedded model, if there is one."""
    folder = SHIPPED_HEADS_DIR / model_name
    return folder if (folder / "config.json").is_file() else None


def untrained_head(target: TargetModel) -> EagleHead:
    """A head initialised from the target's last layer (fc passes the feature through): a weak drafter."""
    head = EagleHead(head_config_from_target(target.config), input_norm=True)
    head.layers[0].load_state_dict(target.decoder.layers[-1].state_dict())
    hidden = target.config.hidden_size
    with torch.no_grad():
        head.fc.weight.zero_()
        head.fc.bias.zero_()
        head.fc.weight[:, hidden:] = torch.eye(hidden)
    return head.attach(target)


@dataclass
class Runtime:
    target: TargetModel
    head: EagleHead | None  # None: autoregressive only
    head_source: str  # a path, "untrained" or "none"
    budget: TreeBudget  # default tree budget for speculative mode

    def engine(self, mode: str = "spec") -> SpeculativeEngine:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} (use one of {', '.join(MODES)})")
        if mode == "ar" or self.head is None:
            return SpeculativeEngine(self.target, NoDrafter)
        head = self.head
        return SpeculativeEngine(self.target, lambda: EagleDrafter(head, self.budget), self.budget)

    def describe(self) -> dict:
        return {
            "model": self.target.name,
            "device": str(self.target.device),
            "dtype": str(self.target.dtype).removeprefix("torch."),
            "head": self.head_source,
        }


def resolve_head(target: TargetModel, head: str | None) -> tuple[EagleHead | None, str]:
    """--head: a folder, 'none', or None for the shipped head of the model (an untrained one if none ships)."""
    if head == "none":
        return None, "none"
    if head == "untrained":
        return untrained_head(target), "untrained"
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
    return untrained_head(target), "untrained"


def load_runtime(model: str | None = None, head: str | None = None, device: str | None = None,
                 dtype: str | None = None, budget: TreeBudget | None = None, progress: bool = True) -> Runtime:
    target = load_target(model, device=device, dtype=dtype, progress=progress)
    drafter_head, source = resolve_head(target, head)
    return Runtime(target=target, head=drafter_head, head_source=source, budget=budget or TreeBudget())
