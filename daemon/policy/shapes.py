"""Tree shape priors per syntax region: boilerplate continues with near certainty (deep, narrow trees),
logic branches (wide, shallow ones)."""

from __future__ import annotations

from dataclasses import dataclass

from ..context.syntax import Region
from ..speculative.drafter import TreeBudget, TreeSizer


@dataclass(frozen=True)
class RegionShape:
    top_k: int  # children per node / frontier width
    depth: int  # most draft steps
    min_prob: float  # stop growing a branch whose path value falls below this


# Priors: boilerplate deep and narrow, logic wide and shallow. Checked against `nestling bench --ablation
# --by-region` on the held-out set (BENCHMARKS.md, "Region priors"; benchmarks/ablation_heldout.json):
# where lookup drafts, boilerplate accepted longer paths than logic (accepted-length p50/p90 of the full
# policy 4/11 vs 2/11), while the EAGLE-only modes accepted equally short paths in both (2/4, 2/3): with the
# shipped head the latency objective caps depth before these magnitudes matter, so they are not yet fitted.
REGION_SHAPES: dict[Region, RegionShape] = {
    Region.BOILERPLATE: RegionShape(top_k=4, depth=9, min_prob=0.02),
    Region.LOGIC: RegionShape(top_k=10, depth=5, min_prob=0.005),
    Region.COMMENT: RegionShape(top_k=6, depth=6, min_prob=0.01),
    Region.STRING: RegionShape(top_k=6, depth=7, min_prob=0.01),
    Region.NEUTRAL: RegionShape(top_k=8, depth=7, min_prob=0.01),
}


def shaped_budget(region: Region, sizer: TreeSizer | None, max_nodes: int,
                  shapes: dict[Region, RegionShape] = REGION_SHAPES) -> TreeBudget:
    shape = shapes.get(region, shapes[Region.NEUTRAL])
    return TreeBudget(top_k=shape.top_k, depth=shape.depth, total_tokens=max_nodes, min_prob=shape.min_prob,
                      sizer=sizer)
