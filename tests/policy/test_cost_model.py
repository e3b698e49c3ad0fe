from types import SimpleNamespace

import torch

from nestling.daemon.policy import cost_model
from nestling.daemon.policy.cost_model import cpu_name, profile_key


def test_cpu_name_reads_the_model_name(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14\nflags\t: avx2\n")
    assert cpu_name(info) == "AMD EPYC 9R14"


def test_cpu_name_falls_back_without_cpuinfo(tmp_path):
    assert cpu_name(tmp_path / "missing") != ""


def test_a_profile_from_another_cpu_model_is_not_reused(monkeypatch):
    target = SimpleNamespace(name="m", device=torch.device("cpu"), dtype=torch.float32)
    head = SimpleNamespace(draft_vocab_size=32000)
    monkeypatch.setattr(cost_model, "cpu_name", lambda: "Intel(R) Xeon(R) Platinum 8488C")
    intel = profile_key(target, head)
    assert profile_key(target, head) == intel
    monkeypatch.setattr(cost_model, "cpu_name", lambda: "AMD EPYC 9R14")
    assert profile_key(target, head) != intel
