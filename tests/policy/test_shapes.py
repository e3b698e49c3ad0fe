"""Tree shape priors per syntax region, and the named variants `nestling bench --shape-variants` measures."""

import pytest

from nestling.daemon.context.syntax import Region
from nestling.daemon.policy.shapes import REGION_SHAPES, RegionShape, shape_variants, shaped_budget


def test_boilerplate_is_deeper_and_narrower_than_logic():
    boilerplate, logic = REGION_SHAPES[Region.BOILERPLATE], REGION_SHAPES[Region.LOGIC]
    assert boilerplate.depth > logic.depth and boilerplate.top_k < logic.top_k
    assert set(REGION_SHAPES) == set(Region)


def test_a_variant_changes_the_fields_it_names_all_regions_first_then_per_region():
    variants = shape_variants({"narrow": {"logic": {"depth": 9}, "all": {"top_k": 4, "min_prob": 0.02}},
                               "shipped": {"all": {"depth": REGION_SHAPES[Region.NEUTRAL].depth}}})
    narrow = variants["narrow"]
    assert narrow[Region.LOGIC] == RegionShape(top_k=4, depth=9, min_prob=0.02)  # the region's entry after "all"
    assert narrow[Region.STRING] == RegionShape(top_k=4, depth=REGION_SHAPES[Region.STRING].depth, min_prob=0.02)
    assert set(narrow) == set(Region)
    assert all(variants["shipped"][r].top_k == REGION_SHAPES[r].top_k for r in Region)
    assert REGION_SHAPES[Region.LOGIC].depth != 9  # the shipped table is not changed
    budget = shaped_budget(Region.LOGIC, None, 31, narrow)
    assert (budget.top_k, budget.depth, budget.min_prob, budget.total_tokens) == (4, 9, 0.02, 31)


@pytest.mark.parametrize("data,message", [
    ([], "expected a JSON object of named variants"),
    ({}, "expected a JSON object of named variants"),
    ({"a b": {"all": {"depth": 3}}}, "use letters, digits"),
    ({"x": [1]}, "expected an object of regions"),
    ({"x": {"loops": {"depth": 3}}}, "unknown regions ['loops']"),
    ({"x": {"all": {}}}, "expected an object with some of top_k, depth, min_prob"),
    ({"x": {"all": {"width": 3}}}, "unknown fields ['width']"),
    ({"x": {"logic": {"depth": 0}}}, "depth must be a whole number of at least 1, not 0"),
    ({"x": {"logic": {"top_k": 2.5}}}, "top_k must be a whole number of at least 1, not 2.5"),
    ({"x": {"logic": {"top_k": True}}}, "top_k must be a whole number of at least 1, not True"),
    ({"x": {"logic": {"top_k": "4"}}}, "top_k must be a whole number of at least 1, not '4'"),
    ({"x": {"logic": {"min_prob": 1}}}, "min_prob must be a number in [0, 1), not 1"),
    ({"x": {"logic": {"min_prob": -0.1}}}, "min_prob must be a number in [0, 1), not -0.1"),
])
def test_a_malformed_variant_is_refused_with_what_is_wrong(data, message):
    with pytest.raises(ValueError) as error:
        shape_variants(data)
    assert message in str(error.value)
