from types import SimpleNamespace

import torch

from nestling.daemon.policy import cost_model
from nestling.daemon.policy.cost_model import profile_key


def test_a_profile_from_another_cpu_model_is_not_reused(monkeypatch):
    target = SimpleNamespace(name="m", device=torch.device("cpu"), dtype=torch.float32)
    head = SimpleNamespace(draft_vocab_size=32000)
    monkeypatch.setattr(cost_model, "cpu_name", lambda: "Intel(R) Xeon(R) Platinum 8488C")
    intel = profile_key(target, head)
    assert profile_key(target, head) == intel
    monkeypatch.setattr(cost_model, "cpu_name", lambda: "AMD EPYC 9R14")
    assert profile_key(target, head) != intel


def test_a_profile_from_a_cpu_with_the_same_name_but_other_instructions_is_not_reused(monkeypatch):
    # A hypervisor names both an AVX2-only and an AVX512-BF16 machine plain "AMD EPYC"; their curves differ ~7x.
    target = SimpleNamespace(name="m", device=torch.device("cpu"), dtype=torch.float32)
    head = SimpleNamespace(draft_vocab_size=32000)
    monkeypatch.setattr(cost_model, "cpu_name", lambda: "AMD EPYC")
    monkeypatch.setattr(cost_model, "cpu_features", lambda: ("avx2", "fma"))
    zen3 = profile_key(target, head)
    monkeypatch.setattr(cost_model, "cpu_features", lambda: ("avx2", "avx512_bf16", "avx512f", "fma"))
    assert profile_key(target, head) != zen3


def test_a_profile_measured_without_packed_weights_is_not_reused_with_them():
    target = SimpleNamespace(name="m", device=torch.device("cpu"), dtype=torch.bfloat16, packed_weights=False)
    head = SimpleNamespace(draft_vocab_size=32000)
    plain = profile_key(target, head)
    target.packed_weights = True
    assert profile_key(target, head) != plain


def test_a_profile_measured_with_another_exact_attention_path_is_not_reused():
    target = SimpleNamespace(name="m", device=torch.device("cpu"), dtype=torch.bfloat16, packed_weights=True)
    head = SimpleNamespace(draft_vocab_size=32000)
    block = profile_key(target, head)
    target.exact_rows, target.exact_fold = 32, False  # attention row by row, one batch entry per row
    by_row = profile_key(target, head)
    target.exact_fold = True  # the unmasked prefix folded into one call: a cheaper curve
    assert len({block, by_row, profile_key(target, head)}) == 3


def test_a_profile_measured_with_an_earlier_revision_of_exact_attention_is_not_reused(monkeypatch):
    from nestling.daemon.models import attention

    target = SimpleNamespace(name="m", device=torch.device("cpu"), dtype=torch.bfloat16, packed_weights=True,
                             exact_rows=32, exact_fold=True)
    head = SimpleNamespace(draft_vocab_size=32000)
    now = profile_key(target, head)
    monkeypatch.setattr(attention, "EXACT_ATTENTION_REVISION", attention.EXACT_ATTENTION_REVISION - 1)
    assert profile_key(target, head) != now
    target.exact_rows = 0  # block attention: its curve does not depend on the exact path's revision
    block = profile_key(target, head)
    monkeypatch.setattr(attention, "EXACT_ATTENTION_REVISION", attention.EXACT_ATTENTION_REVISION + 1)
    assert profile_key(target, head) == block


def test_a_profile_measured_under_other_onednn_kernel_settings_is_not_reused(monkeypatch):
    target = SimpleNamespace(name="m", device=torch.device("cpu"), dtype=torch.bfloat16, packed_weights=True)
    head = SimpleNamespace(draft_vocab_size=32000)
    for name in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        monkeypatch.delenv(name, raising=False)
    default = profile_key(target, head)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")  # no AMX: another curve
    assert profile_key(target, head) != default
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    assert profile_key(target, head) == default  # unset, the key is what it was before the setting was known


def test_a_draft_models_step_is_timed_at_the_depths_asked_for(monkeypatch):
    """The draft step is a depth-2 draft less a depth-1 draft: the draft model's own depth floor must not make both
    grow to the same depth (the difference, the step's cost, was then 0)."""
    from nestling.daemon.speculative.model_drafter import ModelDrafter
    from tiny import tiny_target

    steps = []
    draft_candidates = ModelDrafter.draft_candidates

    def spy(self, *args, **kwargs):
        candidates, spent = draft_candidates(self, *args, **kwargs)
        steps.append(spent)
        return candidates, spent

    monkeypatch.setattr(ModelDrafter, "draft_candidates", spy)
    profile = cost_model.measure(tiny_target(), tiny_target("llama", seed=5), context_tokens=16, sizes=(1, 2),
                                 repeats=2)
    assert set(steps) == {1, 2} and profile.draft_step_ms >= 0.0


def test_the_share_of_the_cpus_other_processes_used_between_two_snapshots():
    from nestling.daemon.policy.cost_model import CpuSnapshot, busy_elsewhere

    before = CpuSnapshot(wall_s=100.0, cpus_busy_s=500.0, own_s=10.0, cpus=2)
    # 10 s on 2 CPUs: 20 CPU-seconds; all processes used 16, this one 6 of them: others 10, half the CPUs
    assert busy_elsewhere(before, CpuSnapshot(110.0, 516.0, 16.0, 2)) == 0.5
    assert busy_elsewhere(before, CpuSnapshot(110.0, 506.0, 16.0, 2)) == 0.0  # only this process
    assert busy_elsewhere(before, CpuSnapshot(110.0, None, 16.0, 2)) is None  # not Linux: unknown
    assert busy_elsewhere(before, CpuSnapshot(100.0, 516.0, 16.0, 2)) is None


def test_a_snapshot_counts_this_processs_own_cpu_time():
    from nestling.daemon.policy.cost_model import cpu_snapshot

    before = cpu_snapshot()
    total = 0
    while cpu_snapshot().own_s - before.own_s < 0.05:
        total += sum(range(10_000))
    after = cpu_snapshot()
    assert after.cpus >= 1 and after.own_s > before.own_s
    if before.cpus_busy_s is not None:  # Linux: the machine's count includes this process's work
        assert after.cpus_busy_s - before.cpus_busy_s > 0


def test_a_profile_measured_while_the_cpu_was_busy_elsewhere_is_used_but_not_kept(monkeypatch, tmp_path):
    made = []

    def fake_measure(target, head, progress=None):
        return cost_model.CostProfile("k", 300, {1: 10.0, 2: 130.0}, 1.0, {"busy_elsewhere": made[-1]})

    monkeypatch.setattr(cost_model, "measure", fake_measure)
    monkeypatch.setattr(cost_model, "profile_key", lambda target, head: "k")
    monkeypatch.setattr(cost_model, "profile_path", lambda key: tmp_path / f"{key}.json")
    made.append(0.9)
    busy = cost_model.load_or_measure(None, None)
    assert busy.verify_ms[2] == 130.0 and not (tmp_path / "k.json").exists()
    made.append(0.05)
    cost_model.load_or_measure(None, None)
    assert (tmp_path / "k.json").exists()
    made.append(None)  # unknown (not Linux): kept
    (tmp_path / "k.json").unlink()
    cost_model.load_or_measure(None, None)
    assert (tmp_path / "k.json").exists()
