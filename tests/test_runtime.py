"""Runtime.engine(): which drafter each mode gets, the draft gate included; a draft model in the head's place."""

import logging
import os
import re
import time

import pytest

from nestling.daemon import runtime as runtime_module
from nestling.daemon.models.default_model import EmbeddedModel
from nestling.daemon.models.errors import ModelLoadError
from nestling.daemon.policy.cost_model import CostProfile, profile_key
from nestling.daemon.policy.gate import GatedDrafter
from nestling.daemon.runtime import Runtime, load_runtime, resolve_head
from nestling.daemon.speculative.drafter import NoDrafter, TreeBudget
from nestling.daemon.speculative.eagle_drafter import EagleDrafter
from nestling.daemon.speculative.engine import StopRule
from nestling.daemon.speculative.lookup_drafter import LookupDrafter, MergedDrafter, confident_match
from nestling.daemon.speculative.model_drafter import ModelDrafter
from tiny import tiny_head, tiny_target, tiny_tokenizer, save_tiny_model_folder

PROFILE = CostProfile("t", 300, {1: 100.0, 16: 150.0, 128: 500.0}, 10.0)


def runtime(draft_gate: bool = True, head: bool = True) -> Runtime:
    target = tiny_target("qwen2")
    return Runtime(target=target, head=tiny_head(target) if head else None, head_source="test",
                   budget=TreeBudget(), draft_gate=draft_gate, _profile=PROFILE)


def test_latency_aware_modes_draft_behind_the_gate_with_a_cheaper_fallback():
    rt = runtime()
    spec = rt.engine("spec").make_drafter()
    assert isinstance(spec, GatedDrafter)
    assert [type(arm) for arm in spec.arms] == [MergedDrafter, NoDrafter]
    assert spec.sure_to_pay is confident_match  # a copy in progress is drafted whatever the gate measured
    for mode in ("eagle-latency", "eagle-syntax"):
        drafter = rt.engine(mode).make_drafter()
        assert [type(arm) for arm in drafter.arms] == [EagleDrafter, NoDrafter] and drafter.sure_to_pay is None
    engine = rt.engine("spec")
    assert engine.make_drafter().gate is engine.make_drafter().gate  # one gate per engine: what it learned carries


def test_reference_and_baseline_modes_and_the_ablation_flag_are_ungated():
    rt = runtime()
    assert isinstance(rt.engine("eagle-ref").make_drafter(), EagleDrafter)
    assert isinstance(rt.engine("lookup").make_drafter(), LookupDrafter)
    assert isinstance(rt.engine("ar").make_drafter(), NoDrafter)
    assert isinstance(runtime(draft_gate=False).engine("spec").make_drafter(), MergedDrafter)
    assert isinstance(runtime(head=False).engine("spec").make_drafter(), LookupDrafter)


def test_trees_fit_the_exact_rows_and_a_reference_tree_that_cannot_says_so(caplog):
    rt = runtime()
    rt.target.exact_rows = 32  # as use_exact_rows sets it on a CPU whose bfloat16 products pass the check
    assert rt.max_tree_nodes == 31 and rt.budget_for("spec").total_tokens <= 31
    assert rt.summary() == "tiny-qwen2 on cpu (float32); head test; exact trees up to 32 tokens"
    rt.engine("eagle-ref")  # the reference tree: 60 nodes and its root
    assert "eagle-ref verifies 61-token trees, more than the 32" in caplog.text
    caplog.clear()
    rt.engine("spec")
    rt.target.exact_rows = 0
    rt.engine("eagle-ref")
    assert "eagle-ref verifies" not in caplog.text


def test_a_draft_model_drafts_the_trees_of_every_tree_mode_losslessly():
    target = tiny_target("qwen2")
    rt = Runtime(target=target, head=None, head_source="model:test", draft_model=tiny_target("llama", seed=5),
                 budget=TreeBudget(top_k=3, depth=4, total_tokens=12), _profile=PROFILE)
    spec = rt.engine("spec").make_drafter()
    assert isinstance(spec.arms[0], MergedDrafter) and isinstance(spec.arms[0].head_drafter, ModelDrafter)
    assert isinstance(rt.engine("eagle-ref").make_drafter(), ModelDrafter)
    prompt = [7, 3, 9, 3, 9, 12, 40, 41]
    expected = rt.engine("ar").generate(prompt, stop=StopRule(max_new_tokens=24)).run().tokens
    for mode in ("spec", "eagle-ref", "eagle-latency", "eagle-syntax"):
        assert rt.engine(mode).generate(prompt, stop=StopRule(max_new_tokens=24)).run().tokens == expected, mode


def test_head_model_spec_loads_a_draft_model_that_shares_the_tokenizer(tmp_path):
    target_dir = save_tiny_model_folder(tmp_path / "target")
    draft_dir = save_tiny_model_folder(tmp_path / "draft", arch="llama", seed=4)
    rt = load_runtime(str(target_dir), f"model:{draft_dir}", dtype="float32", progress=False)
    assert rt.head is None and rt.draft_model is not None and rt.describe()["head"] == f"model:{draft_dir}"
    assert profile_key(rt.target, rt.draft_model) != profile_key(rt.target, None)  # its own draft step cost
    prompt = rt.target.tokenizer("def add(a, b):\n    return")["input_ids"]
    expected = rt.engine("ar").generate(prompt, stop=StopRule(max_new_tokens=16)).run().tokens
    assert rt.engine("spec").generate(prompt, stop=StopRule(max_new_tokens=16)).run().tokens == expected


def _model_folder(path, tokenizer_vocab: int):
    tokenizer = tiny_tokenizer(tokenizer_vocab)
    model = tiny_target(vocab=len(tokenizer)).model
    model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


def test_a_draft_model_with_another_tokenizer_is_refused_by_name(tmp_path):
    target = load_runtime(str(save_tiny_model_folder(tmp_path / "target")), "none", dtype="float32",
                          progress=False).target
    with pytest.raises(ModelLoadError, match="more than the"):
        resolve_head(target, f"model:{_model_folder(tmp_path / 'wide', 340)}", progress=False)
    with pytest.raises(ModelLoadError, match="does not share the tokenizer"):
        resolve_head(target, f"model:{_model_folder(tmp_path / 'other', 300)}", progress=False)
    with pytest.raises(ModelLoadError, match=re.escape(f"--head 'model:{tmp_path / 'missing'}': no such file")):
        resolve_head(target, f"model:{tmp_path / 'missing'}", progress=False)  # (it spoke of --model)
    with pytest.raises(ModelLoadError, match="needs a model"):
        resolve_head(target, "model:", progress=False)
    unweighted = tmp_path / "unweighted"  # (QA: a draft model folder's own errors did not say --head gave it)
    unweighted.mkdir()
    (unweighted / "config.json").write_text("{}")
    with pytest.raises(ModelLoadError, match=re.escape(f"--head 'model:{unweighted}': {unweighted}: no weights")):
        resolve_head(target, f"model:{unweighted}", progress=False)


def test_a_model_without_a_shipped_head_drafts_with_its_embedded_sibling(tmp_path, monkeypatch):
    target = load_runtime(str(save_tiny_model_folder(tmp_path / "target")), "none", dtype="float32",
                          progress=False).target
    sibling = str(save_tiny_model_folder(tmp_path / "small", arch="llama", seed=4))
    entry = EmbeddedModel(name=target.name, distribution_prefix="none-", parts=1, sha256="", extra="",
                          draft_model=sibling)
    monkeypatch.setattr(runtime_module, "EMBEDDED_MODELS", {target.name: entry})
    drafter, source = resolve_head(target, None, progress=False)
    assert source == "model:" + sibling and drafter.name == "small"
    entry = EmbeddedModel(name=target.name, distribution_prefix="none-", parts=1, sha256="", extra="",
                          draft_model=str(tmp_path / "gone"))
    monkeypatch.setattr(runtime_module, "EMBEDDED_MODELS", {target.name: entry})
    assert resolve_head(target, None, progress=False)[1] == "untrained"  # a sibling that fails to load: a warning


def test_a_profile_written_while_the_daemon_runs_is_read_in_place(monkeypatch, tmp_path, caplog):
    """`nestling profile` while the daemon serves: the daemon's engines, gates and sizers use the new curve from
    their next step; an unreadable file keeps the curve in use (and is not read again until it changes)."""
    from nestling.daemon.policy import cost_model

    caplog.set_level(logging.INFO)
    monkeypatch.setattr(cost_model, "profile_path", lambda key: tmp_path / f"{key}.json")
    monkeypatch.setattr(cost_model, "measure", lambda target, head, progress=None: CostProfile(
        profile_key(target, head), 300, {1: 100.0, 16: 150.0, 128: 500.0}, 10.0, {"at": "first"}))
    rt = runtime()
    rt._profile = None
    first = rt.profile
    path = tmp_path / f"{first.key}.json"
    assert path.is_file() and first.measured["at"] == "first"
    gate_share = rt.engine("spec").make_drafter().plain_share  # bound to the profile when the engine was made
    monkeypatch.setattr(runtime_module, "PROFILE_RELOAD_S", 0.0)
    assert rt.profile is first and first.verify_cost(16) == 150.0  # the file is unchanged: nothing read

    CostProfile(first.key, 300, {1: 60.0, 16: 90.0, 128: 400.0}, 6.0, {"at": "second"}).save(path)
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))  # a later write, even on a coarse clock
    assert rt.profile is first and first.verify_cost(16) == 90.0 and first.draft_step_ms == 6.0
    assert gate_share(16) == 60.0 / 90.0 and "read the cost profile timed at second" in caplog.text
    assert rt.budget_for("eagle-latency").sizer.verify_ms[0] == 60.0  # sizers made from now on too

    path.write_text("{not json")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 2 * 10**9))
    assert rt.profile is first and first.verify_cost(16) == 90.0 and "could not be read" in caplog.text
    caplog.clear()
    assert rt.profile is first and "could not be read" not in caplog.text  # not retried until it changes again
    CostProfile("another key", 300, {1: 1.0, 16: 2.0}, 1.0, {}).save(path)
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 3 * 10**9))
    assert rt.profile.verify_cost(16) == 90.0 and "could not be read" in caplog.text  # another model's: not taken
