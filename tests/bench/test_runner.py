"""The bench runner: every mode on every prompt, in an order that rotates per prompt, each output compared
with the baseline's (the first mode named) whatever order they ran in."""

from dataclasses import dataclass, field

import pytest

from nestling.daemon.bench.prompts import BenchPrompt
from nestling.daemon.bench.runner import BenchInterrupted, rotated, run_bench
from nestling.daemon.speculative.accept import Sampling
from nestling.daemon.speculative.stats import GenerationStats


class CharTokenizer:
    """One token per character (enough for FIM prompt building without FIM markers)."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids)


@dataclass
class FakeTarget:
    tokenizer: CharTokenizer = field(default_factory=CharTokenizer)
    fim_tokens: None = None
    positions: int | None = None
    name: str = "fake"


@dataclass
class FakeGeneration:
    tokens: list[int]
    stats: GenerationStats

    def run(self):
        return self


class FakeEngine:
    """Answers the prompt's last three tokens (zeros for the prompts in `wrong_on`) and logs each run."""

    def __init__(self, mode, log, wrong_on=()):
        self.mode, self.log, self.wrong_on = mode, log, {tuple(p) for p in wrong_on}
        self.samplings = []  # the sampling of each measured run

    def generate(self, prompt, sampling=None, stop=None, budget=None):
        if stop.max_new_tokens > 4:  # not the warm-up
            self.log.append(self.mode)
            self.samplings.append(sampling)
        tokens = prompt[-3:] if tuple(prompt) not in self.wrong_on else [0, 0, 0]
        stats = GenerationStats(new_tokens=len(tokens), target_forwards=2, accepted_lengths=[1, 1],
                                first_token_ms=1.0, total_ms=3.0)
        return FakeGeneration(list(tokens), stats)


class FakeRuntime:
    def __init__(self, modes, wrong=None):
        self.target = FakeTarget()
        self.log: list[str] = []
        self.budgets: list[tuple] = []  # (mode, shape table) of each budget_for call
        self._engines = {m: FakeEngine(m, self.log, (wrong or {}).get(m, ())) for m in modes}

    def engine(self, mode):
        return self._engines[mode]

    def budget_for(self, mode, region, shapes=None):
        self.budgets.append((mode, shapes))
        return None


PROMPTS = [BenchPrompt(id=f"p{i}", prefix=f"x = {i}\ny = x +", suffix="\n", path="a.py") for i in range(5)]


def test_rotated_starts_each_prompt_one_mode_later():
    modes = ["ar", "lookup", "spec"]
    assert rotated(modes, 0) == modes
    assert rotated(modes, 1) == ["lookup", "spec", "ar"]
    assert rotated(modes, 5) == ["spec", "ar", "lookup"]


def test_every_mode_runs_first_in_turn():
    modes = ["ar", "lookup", "spec"]
    runtime = FakeRuntime(modes)
    run_bench(runtime, modes, PROMPTS, max_tokens=16, progress=False)
    runs = [runtime.log[i : i + 3] for i in range(0, len(runtime.log), 3)]
    assert [run[0] for run in runs] == ["ar", "lookup", "spec", "ar", "lookup"]
    assert all(sorted(run) == sorted(modes) for run in runs)


def test_outputs_are_compared_with_the_baseline_whatever_ran_first():
    modes = ["ar", "lookup", "spec"]
    bad_prompt = [ord(c) for c in PROMPTS[1].prefix]  # prompt 1: "lookup" runs first, and differs
    runtime = FakeRuntime(modes, wrong={"lookup": [bad_prompt]})
    results = run_bench(runtime, modes, PROMPTS, max_tokens=16, progress=False)
    assert results["ar"].identical == 5
    assert results["spec"].identical == 5
    assert results["lookup"].identical == 4
    flags = [row["identical"] for row in results["lookup"].per_prompt]
    assert flags == [True, False, True, True, True]
    assert results["lookup"].per_prompt[1]["first_difference"] == 0
    assert [row["id"] for row in results["spec"].per_prompt] == [p.id for p in PROMPTS]


def test_sampled_runs_give_each_prompt_its_own_seed_the_same_in_every_mode():
    modes = ["ar", "spec"]
    runtime = FakeRuntime(modes)
    run_bench(runtime, modes, PROMPTS, max_tokens=16, progress=False, sampling=Sampling(0.8, 0.9, seed=2**64 - 2))
    for mode in modes:
        samplings = runtime.engine(mode).samplings
        assert [s.seed for s in samplings] == [2**64 - 2, 2**64 - 1, 0, 1, 2]  # (wrapping at 64 bits)
        assert {(s.temperature, s.top_p) for s in samplings} == {(0.8, 0.9)}
    run_bench(runtime, modes, PROMPTS[:1], max_tokens=16, progress=False)
    assert runtime.engine("spec").samplings[-1].greedy


def test_sampled_runs_refuse_the_greedy_only_peer_baselines():
    with pytest.raises(ValueError, match="greedily only"):
        run_bench(FakeRuntime(["ar", "hf-greedy"]), ["ar", "hf-greedy"], PROMPTS, max_tokens=16, progress=False,
                  sampling=Sampling(temperature=0.5))


def test_the_share_of_drafted_steps_counts_trees_larger_than_the_root():
    from nestling.daemon.bench.runner import ModeResult, format_table

    gated = ModeResult("spec")
    gated.add(GenerationStats(new_tokens=6, target_forwards=4, accepted_lengths=[1, 2, 1, 2], tree_sizes=[1, 5, 1, 9],
                              first_token_ms=1.0, total_ms=5.0), True)
    peer = ModeResult("hf-greedy")
    peer.add(GenerationStats(new_tokens=6, first_token_ms=1.0, total_ms=5.0), True)
    assert gated.summary(None)["drafted_steps"] == 0.5
    assert peer.summary(None)["drafted_steps"] is None
    table = format_table({"spec": gated, "hf-greedy": peer})
    assert table.splitlines()[2].endswith("50%") and table.splitlines()[3].endswith("-")


def test_a_shape_variant_runs_its_base_mode_with_its_own_shape_table():
    runtime = FakeRuntime(["ar", "spec"])
    wide = {"table": "wide"}  # a stand-in: the runner passes the variant's table through, unread
    results = run_bench(runtime, ["ar", "spec", "spec@wide"], PROMPTS, max_tokens=16, progress=False,
                        shapes={"wide": wide})
    assert list(results) == ["ar", "spec", "spec@wide"] and results["spec@wide"].identical == 5
    assert runtime.log.count("spec") == 10  # the variant decodes with the spec engine
    measured = runtime.budgets[3:]  # after the warm-up of each mode
    assert measured.count(("spec", wide)) == 5 and measured.count(("spec", None)) == 5


def test_ctrl_c_keeps_the_prompts_every_mode_finished():
    """(Ctrl-C lost every prompt measured, without a word.)"""
    runtime = FakeRuntime(["ar", "spec"])
    runs = []

    def interrupted(prompt, sampling=None, stop=None, budget=None, engine=runtime._engines["spec"],
                    plain=FakeEngine.generate):
        runs.append(stop.max_new_tokens)
        if len(runs) == 3:  # spec's warm-up, its run on prompt 0, then prompt 1 (where it runs first)
            raise KeyboardInterrupt
        return plain(engine, prompt, sampling, stop, budget)

    runtime._engines["spec"].generate = interrupted
    with pytest.raises(BenchInterrupted) as stop:
        run_bench(runtime, ["ar", "spec"], PROMPTS, max_tokens=8, progress=False)
    assert stop.value.done == 1
    assert {mode: (r.prompts, len(r.per_prompt)) for mode, r in stop.value.results.items()} == \
        {"ar": (1, 1), "spec": (1, 1)}


def test_max_tokens_past_the_models_positions_is_refused_before_a_run():
    runtime = FakeRuntime(["ar", "spec"])
    runtime.target.positions = 20  # the prompts are ~12 characters, one token each
    with pytest.raises(ValueError, match=r"--max-tokens 16 after the longest prompt's 1\d tokens runs past the 20 "
                                         r"positions of fake: give --max-tokens \d at most"):
        run_bench(runtime, ["ar", "spec"], PROMPTS, max_tokens=16, progress=False)
    assert runtime.log == []
