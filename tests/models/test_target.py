from nestling.daemon.models.target import cpu_name


def test_cpu_name_reads_the_model_name(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14\nflags\t: avx2\n")
    assert cpu_name(info) == "AMD EPYC 9R14"


def test_cpu_name_falls_back_without_cpuinfo(tmp_path):
    assert cpu_name(tmp_path / "missing") != ""
