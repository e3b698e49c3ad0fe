"""Cross-entropy of a linear layer's logits against a target distribution, computed in row chunks with its gradient,
so no [rows, vocabulary] tensor lives longer than a chunk.

The head's loss at each unrolled draft step is -sum_v p(v) log softmax(h W^T)(v) over 2,048 positions and a
32,000-token draft vocabulary. Written plainly, the logits, their float32 copy, the log-softmax, the product and
their gradients are each a 262 MB tensor, about 2 GB a draft step; glibc's malloc hands every allocation that large
to a fresh mmap and unmaps it when freed, so the kernel faulted in and zeroed ~12 GB a training step (3.0 million
minor faults, measured; BENCHMARKS.md, "Training step memory"). Here each chunk's logits are formed, turned into
the loss and the gradient with respect to h (softmax - p) W, and dropped: the backward only scales the kept
[rows, hidden] gradient. W is frozen (the target's lm_head rows), so it gets no gradient.
"""

from __future__ import annotations

import torch

CHUNK_ROWS = 256  # rows per chunk: 256 x 32,000 float32 logits are 33 MB


class _SoftCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, target_probs: torch.Tensor):
        batch, rows = hidden.shape[:2]  # hidden [B, m, H], target_probs [B, m, V] (views: never copied whole)
        losses = torch.empty((batch, rows), dtype=torch.float32, device=hidden.device)
        argmax = torch.empty((batch, rows), dtype=torch.long, device=hidden.device)
        grad = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None
        for b in range(batch):
            for start in range(0, rows, CHUNK_ROWS):
                part = slice(start, min(rows, start + CHUNK_ROWS))
                logits = (hidden[b, part] @ weight.T).float()  # [c, V]
                probs = target_probs[b, part].float()
                mass = probs.sum(-1)
                lse = torch.logsumexp(logits, -1)
                losses[b, part] = lse * mass - (probs * logits).sum(-1)
                argmax[b, part] = logits.argmax(-1)
                if grad is not None:  # d loss / d logits = softmax * mass - p, then through the linear layer
                    logits.sub_(lse[:, None]).exp_().mul_(mass[:, None]).sub_(probs)
                    grad[b, part] = (logits.to(weight.dtype) @ weight).to(grad.dtype)
        ctx.save_for_backward(grad)
        ctx.mark_non_differentiable(argmax)
        return losses, argmax

    @staticmethod
    def backward(ctx, grad_losses: torch.Tensor, _grad_argmax):
        (grad,) = ctx.saved_tensors
        return grad * grad_losses[..., None].to(grad.dtype), None, None


def soft_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor,
                       target_probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """hidden [B, m, H], weight [V, H] (no gradient), target_probs [B, m, V] -> (loss [B, m] float32: -sum_v p(v)
    log softmax(hidden W^T)(v), argmax [B, m] of the logits). Differentiable in `hidden` only."""
    return _SoftCrossEntropy.apply(hidden, weight, target_probs)
