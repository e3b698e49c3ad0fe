import re

import pytest
import torch

from nestling.daemon.models.errors import ModelLoadError
from nestling.daemon.models.target import cpu_features, cpu_name, cpu_supports_bfloat16, resolve_device

ZEN4 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\nflags\t: fpu sse avx2 fma avx512f avx512_bf16 avx512_vnni\n"
ZEN3 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\nflags\t: fpu sse avx2 fma\n"


def test_cpu_name_reads_the_model_name(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14\nflags\t: avx2\n")
    assert cpu_name(info) == "AMD EPYC 9R14"


def test_cpu_name_falls_back_without_cpuinfo(tmp_path):
    assert cpu_name(tmp_path / "missing") != ""


def test_cpu_features_tell_apart_cpus_with_one_name(tmp_path):
    (tmp_path / "zen4").write_text(ZEN4)
    (tmp_path / "zen3").write_text(ZEN3)
    assert cpu_name(tmp_path / "zen4") == cpu_name(tmp_path / "zen3")
    assert cpu_features(tmp_path / "zen4") == ("avx2", "avx512_bf16", "avx512_vnni", "avx512f", "fma")
    assert cpu_features(tmp_path / "zen3") == ("avx2", "fma")
    assert cpu_supports_bfloat16(tmp_path / "zen4")
    assert not cpu_supports_bfloat16(tmp_path / "zen3")


def test_arm_bfloat16_is_read_from_features(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nFeatures\t: fp asimd sve i8mm bf16\nCPU implementer\t: 0x41\n")
    assert cpu_features(info) == ("asimd", "bf16", "i8mm", "sve")
    assert cpu_supports_bfloat16(info)


def test_a_device_that_is_no_device_or_not_here_is_a_model_load_error():
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ModelLoadError, match="'bogus' is not a device name"):
        resolve_device("bogus")
    message = "not available" if not torch.cuda.is_available() else "numbered from 0"
    with pytest.raises(ModelLoadError, match=message):
        resolve_device("cuda:97")


@pytest.mark.parametrize("name, says", [("meta", "'meta' is not supported (cpu, cuda or cuda:N)"),
                                        ("mps", "'mps' is not supported (cpu, cuda or cuda:N)"),
                                        ("xpu", "'xpu' is not supported"),
                                        ("", "'' is not a device name (cpu, cuda or cuda:N)")])
def test_a_torch_device_type_the_engine_does_not_run_on_is_refused_by_name(name, says):
    # torch.device() parses these; the engine runs on CPUs and CUDA GPUs only ("" is no name, not the default)
    with pytest.raises(ModelLoadError, match=re.escape(says)):
        resolve_device(name)
    assert resolve_device(None) in (torch.device("cpu"), torch.device("cuda"))
