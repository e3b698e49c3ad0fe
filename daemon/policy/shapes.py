"""Tree shape priors per syntax region: boilerplate continues with near certainty (deep, narrow trees),
logic branches (wide, shallow ones)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..context.syntax import Region
from ..speculative.drafter import TreeBudget, TreeSizer


@dataclass(frozen=True)
class RegionShape:
    top_k: int  # children per node / frontier width
    depth: int  # most draft steps
    min_prob: float  # stop growing a branch whose path value falls below this


ShapeTable = dict[Region, RegionShape]  # a tree shape for every region

# Priors: boilerplate deep and narrow, logic wide and shallow. Checked against `nestling bench --ablation
# --by-region` on the held-out set (BENCHMARKS.md, "Region priors"; benchmarks/ablation_heldout.json):
# where lookup drafts, boilerplate accepted longer paths than logic (accepted-length p50/p90 of the full
# policy 4/11 vs 2/11). Their magnitudes measured with `nestling bench --shape-variants` (BENCHMARKS.md, "The priors'
# magnitudes, measured"; benchmarks/zen4/region_priors/): on a 2-core Zen 4 with the shipped head, every shape from
# top_k 4 / depth 5 to top_k 10 / depth 9 gave the same trees and tau in every region (the latency objective picks
# ~8-10 nodes, inside all of them); only narrower ones (top_k 2 / depth 3 and below) bind, and cost tau. These keep
# the design's direction within the range that measured alike; they would bind where verification pays for far
# bigger trees (a GPU; not measured).
REGION_SHAPES: ShapeTable = {
    Region.BOILERPLATE: RegionShape(top_k=4, depth=9, min_prob=0.02),
    Region.LOGIC: RegionShape(top_k=10, depth=5, min_prob=0.005),
    Region.COMMENT: RegionShape(top_k=6, depth=6, min_prob=0.01),
    Region.STRING: RegionShape(top_k=6, depth=7, min_prob=0.01),
    Region.NEUTRAL: RegionShape(top_k=8, depth=7, min_prob=0.01),
}


SHAPE_FIELDS = {"top_k": int, "depth": int, "min_prob": float}


def shape_variants(data: object) -> dict[str, ShapeTable]:
    """Named shape tables to measure beside the shipped one (`nestling bench --shape-variants FILE`), from JSON such
    as {"narrow": {"all": {"top_k": 4}, "logic": {"depth": 9}}}: each variant is REGION_SHAPES with the fields it
    gives changed, "all" first, then per region (boilerplate, logic, comment, string, neutral). Raises ValueError
    saying what is wrong."""
    if not isinstance(data, dict) or not data:
        raise ValueError("shape variants: expected a JSON object of named variants, e.g. "
                         '{"narrow": {"all": {"top_k": 4, "depth": 9}}}')
    return {str(name): _variant(str(name), entries) for name, entries in data.items()}


def _variant(name: str, entries: object) -> ShapeTable:
    regions = {region.value: region for region in Region}
    if not name or not all(c.isalnum() or c in "-_." for c in name):
        raise ValueError(f"shape variant name {name!r}: use letters, digits, '-', '_' or '.'")
    if not isinstance(entries, dict):
        raise ValueError(f"shape variant {name!r}: expected an object of regions ('all', {', '.join(regions)})")
    unknown = [key for key in entries if key != "all" and key not in regions]
    if unknown:
        raise ValueError(f"shape variant {name!r}: unknown regions {unknown} (use 'all', {', '.join(regions)})")
    table = dict(REGION_SHAPES)
    for key in sorted(entries, key=lambda key: key != "all"):  # "all" first, then the regions in file order
        changes = _shape_fields(name, key, entries[key])
        for region in (list(Region) if key == "all" else [regions[key]]):
            table[region] = replace(table[region], **changes)
    return table


def _shape_fields(name: str, key: str, fields: object) -> dict:
    where = f"shape variant {name!r}, {key}"
    if not isinstance(fields, dict) or not fields:
        raise ValueError(f"{where}: expected an object with some of {', '.join(SHAPE_FIELDS)}")
    unknown = [field for field in fields if field not in SHAPE_FIELDS]
    if unknown:
        raise ValueError(f"{where}: unknown fields {unknown} (use {', '.join(SHAPE_FIELDS)})")
    for field, value in fields.items():
        if SHAPE_FIELDS[field] is int:  # JSON true is no count
            valid, wanted = type(value) is int and value >= 1, "a whole number of at least 1"
        else:
            valid, wanted = type(value) in (int, float) and 0 <= value < 1, "a number in [0, 1)"
        if not valid:
            raise ValueError(f"{where}: {field} must be {wanted}, not {value!r}")
    return {field: SHAPE_FIELDS[field](value) for field, value in fields.items()}


def shaped_budget(region: Region, sizer: TreeSizer | None, max_nodes: int,
                  shapes: ShapeTable = REGION_SHAPES) -> TreeBudget:
    shape = shapes.get(region, shapes[Region.NEUTRAL])
    return TreeBudget(top_k=shape.top_k, depth=shape.depth, total_tokens=max_nodes, min_prob=shape.min_prob,
                      sizer=sizer)
