"""The load-time check of whether a model's matrix products give a row the same bits whatever rows go with it.
(bfloat16: on the CPUs measured its products are row-invariant for small blocks; float32's are not, its one-row
product takes another path than a block's.)"""

import torch

from nestling.daemon.models.row_invariance import invariant_rows

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
    assert invariant_rows(model, BF16, CPU, max_rows=12) == 12


def test_the_first_row_count_that_rounds_differently_sets_the_limit():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8, bias=False), RowsTogether(5)).to(BF16)
    assert invariant_rows(model, BF16, CPU, max_rows=12) == 4
    assert invariant_rows(torch.nn.Sequential(RowsTogether(2)).to(BF16), BF16, CPU) == 1


def test_a_target_sets_exact_rows_on_each_attention_module_it_knows():
    from tiny import tiny_target

    target = tiny_target("qwen2")
    target.use_exact_rows(16, fold=True)
    assert target.exact_rows == 16
    assert all(layer.self_attn.exact_rows == 16 and layer.self_attn.exact_fold for layer in target.decoder.layers)
    del target.decoder.layers[0].self_attn  # a decoder layout it does not know: no exact rows anywhere
    target.use_exact_rows(16)
    assert target.exact_rows == 0 and target.decoder.layers[1].self_attn.exact_rows == 0
