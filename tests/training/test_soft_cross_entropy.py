"""The chunked soft-target cross-entropy equals the plain formula, in value, argmax and gradient."""

import pytest
import torch
import torch.nn.functional as F

from nestling.daemon.training import soft_cross_entropy as module
from nestling.daemon.training.soft_cross_entropy import soft_cross_entropy


@pytest.mark.parametrize("chunk", [1, 3, 7, 256])
def test_chunked_loss_argmax_and_gradient_equal_the_plain_formula(monkeypatch, chunk):
    monkeypatch.setattr(module, "CHUNK_ROWS", chunk)
    generator = torch.Generator().manual_seed(chunk)
    batch, rows, hidden_size, vocab = 3, 11, 8, 40
    weight = torch.randn(vocab, hidden_size, generator=generator)
    hidden = torch.randn(batch, rows + 2, hidden_size, generator=generator)
    full_probs = torch.randn(batch, rows + 2, vocab, generator=generator).softmax(-1)
    probs = full_probs[:, 2:]  # a strided view, as the trainer passes the target's distribution s steps on
    upstream = torch.randn(batch, rows, generator=generator)

    plain_in = hidden[:, :rows].clone().requires_grad_(True)
    logits = F.linear(plain_in, weight)
    plain = -(probs * logits.log_softmax(-1)).sum(-1)
    (plain * upstream).sum().backward()

    chunked_in = hidden[:, :rows].clone().requires_grad_(True)
    loss, argmax = soft_cross_entropy(chunked_in, weight, probs)
    (loss * upstream).sum().backward()

    assert loss.shape == (batch, rows) and torch.allclose(loss, plain, atol=1e-5)
    assert torch.equal(argmax, logits.argmax(-1))
    assert torch.allclose(chunked_in.grad, plain_in.grad, atol=1e-5)


def test_without_a_gradient_it_only_scores():
    weight, hidden = torch.randn(20, 4), torch.randn(2, 5, 4)
    probs = torch.randn(2, 5, 20).softmax(-1)
    with torch.no_grad():
        loss, argmax = soft_cross_entropy(hidden, weight, probs)
    assert torch.allclose(loss, -(probs * F.linear(hidden, weight).log_softmax(-1)).sum(-1), atol=1e-5)
    assert not loss.requires_grad and torch.equal(argmax, F.linear(hidden, weight).argmax(-1))
