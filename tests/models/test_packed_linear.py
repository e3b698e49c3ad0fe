"""Packed oneDNN weights: the same bits as F.linear, row by row, and a model that decodes exactly as before."""

import itertools

import pytest
import torch

from nestling.daemon.models import packed_linear
from nestling.daemon.models.packed_linear import PackedLinear, pack_linears, packing_pays, packing_supported
from nestling.daemon.runtime import pack_weights
from nestling.daemon.speculative.drafter import NoDrafter, TreeBudget
from nestling.daemon.speculative.eagle_drafter import EagleDrafter
from nestling.daemon.speculative.engine import SpeculativeEngine, StopRule
from tiny import VOCAB, informed_head, tiny_target

BF16 = torch.bfloat16
needs_packing = pytest.mark.skipif(not packing_supported(torch.zeros(1, 1, dtype=BF16)),
                                   reason="this torch build has no oneDNN linear ops")


@needs_packing
@pytest.mark.parametrize("shape,bias", [((48, 32), True), ((200, 64), False), ((7, 96), True)])
def test_a_packed_linear_gives_f_linear_bits_for_any_number_of_rows(shape, bias):
    torch.manual_seed(0)
    linear = torch.nn.Linear(shape[1], shape[0], bias=bias).to(BF16)
    packed = PackedLinear.from_linear(linear)
    x = torch.randn(2, 17, shape[1]).to(BF16)
    with torch.no_grad():
        assert torch.equal(packed(x), linear(x))
        together = packed(x[0])
        for row in range(17):  # a row's result does not depend on the rows multiplied with it
            assert torch.equal(packed(x[0, row : row + 1]), together[row : row + 1])


@needs_packing
def test_a_packed_linear_can_compute_a_lone_row_as_two_and_gives_it_the_block_kernels_bits():
    torch.manual_seed(1)
    packed = PackedLinear.from_linear(torch.nn.Linear(96, 40).to(BF16))
    x = torch.randn(1, 1, 96).to(BF16)
    with torch.no_grad():
        block = packed_linear.packed_linear(torch.cat([x[0], x[0]]), packed.packed, packed.bias, 40)[:1]
        packed.one_row_as_two = True
        lone = packed(x)
        assert lone.shape == (1, 1, 40) and torch.equal(lone[0], block)
        several = torch.randn(3, 96).to(BF16)
        assert torch.equal(packed(several), packed_linear.packed_linear(several, packed.packed, packed.bias, 40))


@needs_packing
def test_pack_linears_replaces_bfloat16_linears_only():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8).to(BF16), torch.nn.ReLU(), torch.nn.Linear(8, 4).float())
    assert pack_linears(model) == 1
    assert isinstance(model[0], PackedLinear) and type(model[2]) is torch.nn.Linear


def test_packing_is_refused_for_float32_weights_or_when_it_measures_slower(monkeypatch):
    assert not packing_pays(torch.randn(64, 32))
    if not packing_supported(torch.zeros(1, 1, dtype=BF16)):
        pytest.skip("this CPU has no packed bfloat16 products (the float32 half above ran)")
    weight = torch.randn(64, 32).to(BF16)

    def clock_where(plain_s: float, packed_s: float):
        # each turn reads the clock around a plain product, then around a packed one
        steps = itertools.cycle([0.0, plain_s, 0.0, packed_s])
        now = [0.0]

        def clock():
            now[0] += next(steps)
            return now[0]
        return clock

    assert packing_pays(weight, clock=clock_where(0.002, 0.001))
    assert not packing_pays(weight, clock=clock_where(0.001, 0.002))
    monkeypatch.setattr(packed_linear, "same_bits", lambda weight, packed: False)
    assert not packing_pays(weight, clock=clock_where(0.002, 0.001))

    def refused(weight, packed):
        raise RuntimeError("unsupported")
    monkeypatch.setattr(packed_linear, "same_bits", refused)  # the model loads unpacked, with a warning
    assert not packing_pays(weight, clock=clock_where(0.002, 0.001))


def bfloat16_pair():
    target = tiny_target("qwen2", stop_ids=(VOCAB - 1,))
    target.model.to(BF16)
    return target, informed_head(target)


def decode(target, head, prompt, budget):
    ar = SpeculativeEngine(target, NoDrafter).generate(prompt, stop=StopRule(max_new_tokens=40)).run()
    spec = SpeculativeEngine(target, lambda: EagleDrafter(head), budget).generate(
        prompt, stop=StopRule(max_new_tokens=40)).run()
    return ar.tokens, spec.tokens


@needs_packing
def test_a_packed_bfloat16_model_decodes_exactly_as_the_unpacked_one(monkeypatch):
    plain_target, plain_head = bfloat16_pair()
    target, head = bfloat16_pair()
    monkeypatch.setattr("nestling.daemon.runtime.packing_pays", lambda weight: True)
    assert pack_weights(target, head) and target.packed_weights
    assert isinstance(target.lm_head, PackedLinear) and head._draft_lm_packed is not None
    assert not any(type(m) is torch.nn.Linear for m in [*target.model.modules(), *head.modules()])
    prompts = [[1, 2, 3], [5, 9, 5, 9, 5, 9, 5], list(range(10, 40)), [7] * 12]
    budgets = [TreeBudget(top_k=4, depth=5, total_tokens=20), TreeBudget(top_k=2, depth=3, total_tokens=6)]
    for prompt, budget in itertools.product(prompts, budgets):
        assert decode(target, head, prompt, budget) == decode(plain_target, plain_head, prompt, budget)
    ids = torch.tensor([prompts[2]])
    positions = torch.arange(ids.shape[1])[None]
    from nestling.daemon.models.kv_cache import new_cache

    packed_out = target.forward(ids, positions, new_cache())
    plain_out = plain_target.forward(ids, positions, new_cache())
    assert all(torch.equal(a, b) for a, b in zip(packed_out, plain_out))


def test_pack_weights_leaves_a_model_as_it_is_when_packing_does_not_pay(monkeypatch):
    target, head = bfloat16_pair()
    monkeypatch.setattr("nestling.daemon.runtime.packing_pays", lambda weight: False)
    assert not pack_weights(target, head)
    assert type(target.lm_head) is torch.nn.Linear and head._draft_lm_packed is None


@needs_packing
def test_a_verdict_naming_two_row_products_switches_them_and_decoding_stays_exact(monkeypatch, tmp_path):
    """The runtime's wiring: a kept verdict with `two_row` shapes makes those packed products run a lone row as two
    (as on the Zen 4's down projection), the others stay as they are, and spec still writes plain decoding's tokens."""
    from nestling.daemon.models import row_invariance
    from nestling.daemon.runtime import use_exact_rows

    monkeypatch.setenv("NESTLING_CACHE_DIR", str(tmp_path))
    target, head = bfloat16_pair()
    monkeypatch.setattr("nestling.daemon.runtime.packing_pays", lambda weight: True)
    assert pack_weights(target, head)
    down = target.decoder.layers[0].mlp.down_proj
    shape = [down.out_features, down.in_features]
    verdict = row_invariance.ExactRows(rows=16, fold=False, two_row=[shape])
    monkeypatch.setattr("nestling.daemon.runtime.load_or_check", lambda *a: verdict)
    assert use_exact_rows(target) == 16
    switched = [m for m in target.model.modules() if isinstance(m, PackedLinear) and m.one_row_as_two]
    assert switched and all([m.out_features, m.in_features] == shape for m in switched)
    assert len(switched) == len(target.decoder.layers)  # every layer's down projection, nothing else
    for prompt in ([1, 2, 3], list(range(10, 40))):
        ar, spec = decode(target, head, prompt, TreeBudget(top_k=4, depth=5, total_tokens=15))
        assert spec == ar
