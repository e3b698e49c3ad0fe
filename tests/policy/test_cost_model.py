import json
from types import SimpleNamespace

import pytest
import torch

from nestling.daemon.policy import cost_model
from nestling.daemon.policy.cost_model import profile_key

PROFILE_PATH = cost_model.profile_path  # (before a test replaces it)


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


def _profile(medians: dict, check: dict) -> "cost_model.CostProfile":
    return cost_model.CostProfile("k", 300, dict(medians), 5.0, {"medians_ms": dict(medians), "check_ms": dict(check)})


def test_the_check_spread_reads_the_shape_not_the_level(tmp_path):
    curve = {1: 60.0, 8: 70.0, 16: 90.0}
    assert cost_model.check_spread(_profile(curve, curve)) == 1.0
    assert cost_model.check_spread(_profile(curve, {1: 66.0, 8: 77.0, 16: 99.0})) == pytest.approx(1.0)  # all 10% slower
    # the Zen 4's outlier: a one-token forward timed 76 ms in the curve, 60 in the check, big trees alike
    slow_start = _profile({1: 76.0, 8: 74.0, 16: 92.0}, {1: 60.0, 8: 71.0, 16: 92.0})
    assert cost_model.check_spread(slow_start) == pytest.approx(92.0 / 92.0 / (60.0 / 76.0))
    assert cost_model.check_spread(slow_start) > cost_model.CHECK_SPREAD
    slow_start.save(tmp_path / "p.json")  # JSON keeps the sizes as strings: read alike after loading
    assert cost_model.check_spread(cost_model.CostProfile.load(tmp_path / "p.json")) == pytest.approx(
        cost_model.check_spread(slow_start))
    assert cost_model.check_spread(cost_model.CostProfile("k", 300, curve, 5.0, {"medians_ms": curve})) == 1.0


def test_a_curve_its_check_disagrees_with_is_measured_again(monkeypatch):
    curves = [({1: 76.0, 8: 74.0, 16: 92.0}, {1: 60.0, 8: 71.0, 16: 92.0}),  # off: measured again
              ({1: 60.0, 8: 72.0, 16: 93.0}, {1: 61.0, 8: 71.0, 16: 92.0})]
    measured, retries = [], []

    def fake_measure(target, head, progress=None, **options):
        measured.append(options)
        return _profile(*curves[len(measured) - 1])

    monkeypatch.setattr(cost_model, "measure", fake_measure)
    profile = cost_model.measure_consistent(None, None, on_retry=retries.append, context_tokens=64)
    assert profile.verify_ms[1] == 60.0 and profile.measured["attempt"] == 2
    assert retries == [2] and measured == [{"context_tokens": 64}] * 2  # options passed on to every attempt


def test_when_every_check_disagrees_the_most_consistent_curve_is_used(monkeypatch, caplog):
    spreads = iter([1.5, 1.3, 1.4])

    def fake_measure(target, head, progress=None):
        return _profile({1: 60.0, 16: 90.0}, {1: 60.0 * next(spreads), 16: 90.0})

    monkeypatch.setattr(cost_model, "measure", fake_measure)
    profile = cost_model.measure_consistent(None, None, attempts=3)
    assert profile.measured["attempt"] == 2 and cost_model.check_spread(profile) == pytest.approx(1.3)
    assert "3 cost curves in a row disagreed" in caplog.text


def test_load_or_measure_keeps_a_checked_curve(monkeypatch, tmp_path):
    curves = iter([({1: 76.0, 16: 92.0}, {1: 60.0, 16: 92.0}), ({1: 60.0, 16: 92.0}, {1: 59.0, 16: 93.0})])
    monkeypatch.setattr(cost_model, "measure", lambda target, head, progress=None: _profile(*next(curves)))
    monkeypatch.setattr(cost_model, "profile_key", lambda target, head: "k")
    monkeypatch.setattr(cost_model, "profile_path", lambda key: tmp_path / f"{key}.json")
    assert cost_model.load_or_measure(None, None).verify_ms[1] == 60.0
    assert cost_model.CostProfile.load(tmp_path / "k.json").verify_ms[1] == 60.0  # the second curve is the one kept


def test_a_first_measure_shows_its_progress_where_asked_and_a_further_curve_restarts_it(monkeypatch, tmp_path,
                                                                                        capsys):
    curves = iter([({1: 76.0, 16: 92.0}, {1: 60.0, 16: 92.0}), ({1: 60.0, 16: 92.0}, {1: 59.0, 16: 93.0})])

    def fake_measure(target, head, progress=None):
        progress(len(cost_model.VERIFY_SIZES))  # one round of every size
        return _profile(*next(curves))

    monkeypatch.setattr(cost_model, "measure", fake_measure)
    monkeypatch.setattr(cost_model, "profile_key", lambda target, head: "k")
    monkeypatch.setattr(cost_model, "profile_path", lambda key: tmp_path / f"{key}.json")
    assert cost_model.load_or_measure(None, None, show_progress=True).verify_ms[1] == 60.0
    shown = capsys.readouterr().err
    assert "verify forwards" in shown and "attempt 2 (the check disagreed with the curve)" in shown
    assert f"12/{7 * len(cost_model.VERIFY_SIZES)}" in shown
    (tmp_path / "k.json").unlink()
    curves = iter([({1: 60.0, 16: 92.0}, {1: 59.0, 16: 93.0})])
    cost_model.load_or_measure(None, None)  # by default (a daemon's log) no bar
    assert "verify forwards" not in capsys.readouterr().err


def test_a_cached_profile_that_cannot_be_read_reads_as_none(tmp_path):
    path = tmp_path / "p.json"
    assert cost_model.CostProfile.read(path) is None  # none cached
    path.write_text("{not json")
    assert cost_model.CostProfile.read(path) is None
    path.write_text('{"key": "k", "verify_ms": {"1": 5.0}}')  # an older layout, fields missing
    assert cost_model.CostProfile.read(path) is None
    _profile({1: 60.0, 16: 90.0}, {1: 60.0}).save(path)
    assert cost_model.CostProfile.read(path).verify_ms == {1: 60.0, 16: 90.0}


@pytest.mark.parametrize("damage", [
    {"verify_ms": "fast"}, {"verify_ms": {}}, {"verify_ms": {"1": 60.0}}, {"draft_step_ms": None},
    {"verify_ms": {"1": 0.0, "16": 0.0}}, {"verify_ms": {"1": float("nan"), "16": 90.0}},
    {"verify_ms": {"1": 60.0, "16": float("inf")}}, {"verify_ms": {"1": -5.0, "16": 90.0}},
    {"draft_step_ms": -1.0}, {"draft_step_ms": True}, {"verify_ms": {"2": 60.0, "16": 90.0}}, {"key": 5},
])
def test_a_damaged_profile_file_is_timed_again_with_a_log_line(tmp_path, damage, caplog):
    """(QA: a hand-edited file with a string, an empty curve, a null draft step or zeros failed every completion, and
    `nestling profile` too; NaN or negative times were taken, and every tree was one node.)"""
    path = tmp_path / "p.json"
    _profile({1: 60.0, 16: 90.0}, {1: 60.0}).save(path)
    path.write_text(json.dumps({**json.loads(path.read_text()), **damage}))
    assert cost_model.CostProfile.read(path) is None
    assert f"the cost profile {path} cannot be used" in caplog.text


def test_a_profile_that_cannot_be_kept_is_used_with_a_warning(monkeypatch, tmp_path, caplog):
    """(QA: a read-only home, or a full disk, failed every completion: `[Errno 13] Permission denied`.)"""
    monkeypatch.setattr(cost_model, "measure", lambda target, head, progress=None: _profile({1: 60.0, 16: 92.0},
                                                                                           {1: 59.0, 16: 93.0}))
    monkeypatch.setattr(cost_model, "profile_key", lambda target, head: "k")
    (tmp_path / "file").write_text("")
    monkeypatch.setattr(cost_model, "profile_path", lambda key: tmp_path / "file" / "profiles" / f"{key}.json")
    assert cost_model.load_or_measure(None, None).verify_ms[1] == 60.0
    assert "cannot write the cost profile" in caplog.text and "timed again at the next start" in caplog.text
    monkeypatch.setenv("NESTLING_CACHE_DIR", str(tmp_path / "file"))  # the variable names a file
    monkeypatch.setattr(cost_model, "profile_path", PROFILE_PATH)
    assert cost_model.load_or_measure(None, None).verify_ms[1] == 60.0
    assert "the cost profile is timed but not kept: $NESTLING_CACHE_DIR is" in caplog.text
