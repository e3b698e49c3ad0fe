"""The load-time check of whether a model's matrix products give a row the same bits whatever rows go with it.
(bfloat16: on the CPUs measured its products are row-invariant for small blocks; float32's are not, its one-row
product takes another path than a block's.)"""

import json

import torch

from nestling.daemon.models.packed_linear import one_row_as_two
from nestling.daemon.models.row_invariance import invariant_rows, run_one_rows_as_two

BF16, CPU = torch.bfloat16, torch.device("cpu")


class RowsTogether(torch.nn.Linear):
    """A product whose rows change once `rows` or more are multiplied together (as a kernel switch does)."""

    def __init__(self, rows: int):
        super().__init__(8, 8)
        self.rows = rows

    def forward(self, x):
        y = super().forward(x)
        return y + 0.25 * x.shape[0] if x.shape[0] >= self.rows else y


def test_row_invariant_products_pass_up_to_the_rows_checked():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 8)).to(BF16)
    assert invariant_rows(model, BF16, CPU, max_rows=12) == (12, [])


def test_the_first_row_count_that_rounds_differently_sets_the_limit():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8, bias=False), RowsTogether(5)).to(BF16)
    assert invariant_rows(model, BF16, CPU, max_rows=12) == (4, [])
    assert invariant_rows(torch.nn.Sequential(RowsTogether(2)).to(BF16), BF16, CPU) == (1, [])


class LoneRowKernel(torch.nn.Linear):
    """A packed-style product whose one-row kernel rounds differently from its block kernel (the Zen 4's packed down
    projection), with PackedLinear's switch to compute a lone row as two."""

    def __init__(self, in_features=8, out_features=8, together_from: int = 99):
        super().__init__(in_features, out_features)
        self.one_row_as_two = False
        self.together_from = together_from  # from this many rows the block kernel changes too

    def forward(self, x):
        if self.one_row_as_two and x.shape[0] == 1:
            return one_row_as_two(x, self._kernel)
        return self._kernel(x)

    def _kernel(self, x):
        y = super().forward(x)
        if x.shape[0] == 1:
            return y + 0.25
        return y + 0.5 if x.shape[0] >= self.together_from else y


def test_a_packed_product_whose_lone_row_rounds_apart_counts_its_rows_as_two():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), LoneRowKernel(16, 8)).to(BF16)
    assert invariant_rows(model, BF16, CPU, max_rows=12) == (12, [[8, 16]])
    assert model[1].one_row_as_two is False  # the check leaves the module as it found it
    blocked = torch.nn.Sequential(LoneRowKernel(8, 8, together_from=7)).to(BF16)
    assert invariant_rows(blocked, BF16, CPU, max_rows=12) == (6, [[8, 8]])
    plain = torch.nn.Sequential(RowsTogether(2)).to(BF16)  # no switch to flip: nothing to gain
    assert invariant_rows(plain, BF16, CPU, max_rows=12) == (1, [])


def test_run_one_rows_as_two_switches_the_named_shapes_only_and_a_lone_row_then_gets_its_block_bits():
    model = torch.nn.Sequential(LoneRowKernel(8, 16), LoneRowKernel(16, 8), LoneRowKernel(16, 8)).to(BF16)
    assert run_one_rows_as_two(model, [[8, 16]]) == 2
    assert [m.one_row_as_two for m in model] == [False, True, True]
    x = torch.randn(3, 16).to(BF16)
    with torch.no_grad():
        assert torch.equal(model[1](x[:1]), model[1](x)[:1])
        assert not torch.equal(model[0](x[:1, :8]), model[0](x[:, :8])[:1])  # left alone: its lone row differs


def test_one_row_as_two_keeps_the_leading_shape():
    linear = torch.nn.Linear(8, 5)
    x = torch.randn(1, 1, 8)
    with torch.no_grad():
        y = one_row_as_two(x, linear)
        assert y.shape == (1, 1, 5) and torch.allclose(y, linear(x))


def test_a_target_sets_exact_rows_on_each_attention_module_it_knows():
    from tiny import tiny_target

    target = tiny_target("qwen2")
    target.use_exact_rows(16, fold=True)
    assert target.exact_rows == 16 and target.exact_fold
    assert all(layer.self_attn.exact_rows == 16 and layer.self_attn.exact_fold for layer in target.decoder.layers)
    del target.decoder.layers[0].self_attn  # a decoder layout it does not know: no exact rows anywhere
    target.use_exact_rows(16, fold=True)
    assert target.exact_rows == 0 and not target.exact_fold and target.decoder.layers[1].self_attn.exact_rows == 0


def _counting_checks(monkeypatch):
    """Count how often the product check runs (load_or_check calls it only when no verdict is kept)."""
    from nestling.daemon.models import row_invariance

    calls = []
    real = row_invariance.invariant_rows
    monkeypatch.setattr(row_invariance, "invariant_rows", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def test_the_verdict_is_kept_on_disk_and_reused(monkeypatch, tmp_path):
    from nestling.daemon.models.row_invariance import load_or_check, verdict_key, verdict_path

    monkeypatch.setenv("NESTLING_CACHE_DIR", str(tmp_path))
    calls = _counting_checks(monkeypatch)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8, bias=False), RowsTogether(5)).to(BF16)
    first = load_or_check(model, BF16, CPU, (1, 2, 8))
    assert (first.rows, calls) == (4, [1])
    assert verdict_path(verdict_key(model, BF16, CPU, (1, 2, 8))).is_file()
    assert load_or_check(model, BF16, CPU, (1, 2, 8)) == first and calls == [1]  # read back, not checked again
    load_or_check(model, BF16, CPU, (2, 2, 8))  # another attention geometry: another verdict
    assert calls == [1, 1]


def test_the_key_follows_shapes_dtype_threads_and_kernel_settings_not_weights(monkeypatch):
    from nestling.daemon.models.row_invariance import verdict_key

    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 8)).to(BF16)
    key = verdict_key(model, BF16, CPU, (1, 2, 8))
    same_shapes = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 8)).to(BF16)
    assert verdict_key(same_shapes, BF16, CPU, (1, 2, 8)) == key
    assert verdict_key(torch.nn.Sequential(torch.nn.Linear(8, 24), torch.nn.Linear(24, 8)).to(BF16), BF16, CPU,
                       (1, 2, 8)) != key
    assert verdict_key(model.to(torch.float16), torch.float16, CPU, (1, 2, 8)) != key
    model.to(BF16)  # Module.to works in place
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # another set of kernels
    assert verdict_key(model, BF16, CPU, (1, 2, 8)) != key
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    monkeypatch.setenv("NESTLING_SOMETHING_ELSE", "1")  # any other variable leaves it alone
    assert verdict_key(model, BF16, CPU, (1, 2, 8)) == key
    threads = torch.get_num_threads()
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads + 1)
    assert verdict_key(model, BF16, CPU, (1, 2, 8)) != key


def test_an_unreadable_or_impossible_verdict_is_checked_again(monkeypatch, tmp_path):
    from nestling.daemon.models.row_invariance import load_or_check, verdict_key, verdict_path

    monkeypatch.setenv("NESTLING_CACHE_DIR", str(tmp_path))
    calls = _counting_checks(monkeypatch)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 8)).to(BF16)
    path = verdict_path(verdict_key(model, BF16, CPU, (1, 2, 8)))
    path.parent.mkdir(parents=True)
    for kept in ("not json {", '{"rows": 4}', '{"rows": 99, "fold": true}', '{"rows": "32", "fold": true}',
                 '{"rows": 32, "fold": 1}', "[]", '{"rows": 32, "fold": true, "two_row": [[8]]}',
                 '{"rows": 32, "fold": true, "two_row": [[8, -1]]}', '{"rows": 32, "fold": true, "two_row": 3}'):
        path.write_text(kept)
        verdict = load_or_check(model, BF16, CPU, (1, 2, 8))
        assert verdict.rows == 32 and isinstance(verdict.fold, bool)
        assert json.loads(path.read_text()) == {"rows": 32, "fold": verdict.fold, "two_row": []}  # checked anew
    assert len(calls) == 9


def test_a_cache_that_cannot_be_written_still_gives_the_verdict(monkeypatch, tmp_path, caplog):
    from nestling.daemon.models.row_invariance import load_or_check

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("NESTLING_CACHE_DIR", str(blocker))  # its "exactness" folder cannot be made
    model = torch.nn.Sequential(torch.nn.Linear(8, 16)).to(BF16)
    assert load_or_check(model, BF16, CPU, (1, 2, 8)).rows == 32
    assert "could not keep the row-invariance verdict" in caplog.text


def test_use_exact_rows_checks_once_per_machine(monkeypatch, tmp_path):
    from tiny import tiny_target

    from nestling.daemon.runtime import use_exact_rows

    monkeypatch.setenv("NESTLING_CACHE_DIR", str(tmp_path))
    calls = _counting_checks(monkeypatch)
    first = tiny_target("qwen2")
    first.model.to(BF16)
    rows = use_exact_rows(first)
    assert calls == [1] and first.exact_rows == rows
    again = tiny_target("qwen2")
    again.model.to(BF16)
    assert use_exact_rows(again) == rows and again.exact_rows == rows and calls == [1]  # the kept verdict
    assert use_exact_rows(tiny_target("qwen2")) == 0 and calls == [1]  # float32: never checked, never exact
