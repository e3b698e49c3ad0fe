"""The peer baselines (transformers' own generate) produce the same tokens as nestling's AR decoding, and
their stats count forwards and accepted chunks the way the engine does."""

import pytest
import torch

from nestling.daemon.bench.peers import PeerEngine
from nestling.daemon.speculative.engine import SpeculativeEngine, StopRule
from tiny import VOCAB, tiny_target


def prompts():
    """Random prompts, some repeated twice (so prompt lookup finds matches), some with a stop token late."""
    out = []
    for seed in range(6):
        g = torch.Generator().manual_seed(seed)
        body = torch.randint(0, VOCAB - 1, (9 + seed,), generator=g).tolist()
        out.append(body * 2 if seed % 2 else body)
    return out


@pytest.fixture(scope="module", params=["qwen2", "llama"])
def target(request):
    return tiny_target(request.param, stop_ids=(VOCAB - 1,))


@pytest.mark.parametrize("peer", ["hf-greedy", "hf-lookup"])
@pytest.mark.parametrize("max_new", [1, 7, 40])
def test_peer_output_equals_autoregressive(target, peer, max_new):
    ar = SpeculativeEngine(target)
    engine = PeerEngine(target, peer)
    for prompt in prompts():
        stop = StopRule(max_new_tokens=max_new)
        reference = ar.generate(prompt, stop=stop).run()
        generation = engine.generate(prompt, stop=stop).run()
        assert generation.tokens == reference.tokens
        assert generation.stats.new_tokens == len(reference.tokens)
        assert generation.stats.stop_reason == reference.stats.stop_reason


def test_peer_stats_count_forwards_and_chunks(target):
    greedy, lookup = PeerEngine(target, "hf-greedy"), PeerEngine(target, "hf-lookup")
    drafted = 0
    for prompt in prompts():
        for engine in (greedy, lookup):
            stats = engine.generate(prompt, stop=StopRule(max_new_tokens=40)).run().stats
            emitted = 1 + sum(stats.accepted_lengths)  # the prefill's token, then one chunk per forward
            # a generation that ends at the stop token also emitted that token
            assert emitted - stats.new_tokens in ((0,) if stats.stop_reason == "max_tokens" else (0, 1))
            assert stats.target_forwards == len(stats.accepted_lengths)
            assert 0 < stats.first_token_ms <= stats.total_ms
            if engine is greedy:
                assert set(stats.accepted_lengths) <= {1}
            else:
                drafted += sum(n - 1 for n in stats.accepted_lengths)
    assert drafted > 0  # prompt lookup accepted drafted tokens somewhere, so fewer forwards than tokens


def test_unknown_peer_is_refused(target):
    with pytest.raises(ValueError, match="unknown peer"):
        PeerEngine(target, "hf-medusa")
