"""The CLI as a user runs it (a subprocess), on a tiny random model folder."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nestling.daemon.models.eagle_head import save_head
from nestling.daemon.service.completion import predicted_keystroke
from tiny import save_split_character_model, save_tiny_model_folder, tiny_head


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_tiny_model_folder(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def head_dir(tmp_path_factory, model_dir):
    from nestling.daemon.models.target import load_target
    target = load_target(str(model_dir), dtype="float32", progress=False)
    return save_head(tiny_head(target), tmp_path_factory.mktemp("head") / "head")


@pytest.fixture()
def source(tmp_path):
    path = tmp_path / "example.py"
    path.write_text("import os\n\n\ndef main():\n    print(os.getcwd())\n\n\nmain()\n")
    return path


def nestling(*args, env=None):
    return subprocess.run([sys.executable, "-m", "nestling.daemon.cli.main", *map(str, args)],
                          capture_output=True, text=True, timeout=300, env=env)


def test_complete_json_is_one_object_with_text_and_stats(model_dir, head_dir, source):
    spec = nestling("complete", source, "--line", 5, "--col", 5, "--model", model_dir, "--head", head_dir,
                    "--dtype", "float32", "--max-tokens", 12, "--json")
    ar = nestling("complete", source, "--line", 5, "--col", 5, "--model", model_dir, "--head", head_dir,
                  "--dtype", "float32", "--max-tokens", 12, "--json", "--mode", "ar")
    assert spec.returncode == 0, spec.stderr
    assert ar.returncode == 0, ar.stderr
    spec_out, ar_out = json.loads(spec.stdout), json.loads(ar.stdout)
    assert spec_out["text"] == ar_out["text"] and spec_out["stats"]["tokens"] == ar_out["stats"]["tokens"] > 0
    assert {"tau", "tokens", "total_ms", "prefill_ms", "draft_ms", "verify_ms"} <= set(spec_out["stats"])
    from nestling.proto import completion_pb2 as pb

    daemons = {field.name for field in pb.CompletionStats.DESCRIPTOR.fields}  # what `complete --daemon --json` gives
    assert daemons - {"queue_ms", "region", "mode", "line_mode"} <= set(spec_out["stats"])  # (region, mode and
    assert {"region", "mode", "line_mode"} <= set(spec_out)  # line_mode: at the top here)
    assert ar_out["stats"]["tau"] == 1.0
    cursor = source.read_text().index("print(os")  # line 5, column 5: where the daemon's `replaces` would be
    assert spec_out["replaces"] == {"start": cursor, "end": cursor}  # (local --json lacked it; one parser reads both)


def test_complete_plain_prints_text_then_stats_on_stderr(model_dir, source):
    flags = ("complete", source, "--line", 1, "--col", 1, "--model", model_dir, "--head", "none", "--max-tokens", 5)
    result, as_json = nestling(*flags), nestling(*flags, "--json")
    assert result.returncode == 0, result.stderr
    assert result.stdout == json.loads(as_json.stdout)["text"] + "\n"  # the completion alone on stdout
    assert "tokens, mode spec" in result.stderr
    closed = subprocess.run([sys.executable, "-m", "nestling.daemon.cli.main", *map(str, flags)], stdout=None,
                            stderr=subprocess.PIPE, text=True, timeout=300, preexec_fn=lambda: os.close(1))
    assert closed.returncode == 0 and "Traceback" not in closed.stderr, closed.stderr  # (stdout closed: `>&-`)


@pytest.mark.parametrize("line,col,message", [(99, 1, "line 99 is outside"), (1, 50, "column 50 is past the end"),
                                              (1, 0, "column 0 is before the start of line 1 (columns start at 1)")])
def test_bad_positions_are_clear_errors(model_dir, source, line, col, message):
    result = nestling("complete", source, "--line", line, "--col", col, "--model", model_dir)
    assert result.returncode == 2 and message in result.stderr


def test_a_file_that_cannot_be_read_is_a_clear_error(model_dir, tmp_path):
    for path, says in ((tmp_path / "absent.py", "No such file or directory"), (tmp_path, "Is a directory")):
        result = nestling("complete", path, "--line", 1, "--col", 1, "--model", model_dir)
        assert result.returncode == 2 and f"error: cannot read {path}: {says}" in result.stderr, result.stderr


@pytest.mark.parametrize("flags,message", [(["--temperature", "nan"], "--temperature >= 0"),
                                           (["--device", "bogus"], "'bogus' is not a device name"),
                                           (["--device", "meta"], "device 'meta' is not supported (cpu, cuda or "
                                                                  "cuda:N)"),
                                           (["--device", "mps"], "device 'mps' is not supported (cpu, cuda or cuda:N)"),
                                           (["--device", ""], "device '' is not a device name (cpu, cuda or cuda:N)")])
def test_bad_sampling_and_device_flags_are_clear_errors(model_dir, source, flags, message):
    result = nestling("complete", source, "--line", 1, "--col", 1, "--model", model_dir, *flags)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_bad_model_and_head_paths_are_clear_errors(tmp_path, model_dir, source):
    result = nestling("complete", source, "--line", 1, "--col", 1, "--model", tmp_path / "nope")
    assert result.returncode == 2 and "no such file or folder" in result.stderr
    result = nestling("complete", source, "--line", 1, "--col", 1, "--model", model_dir, "--head", tmp_path / "nohead")
    assert result.returncode == 2 and "no such head folder" in result.stderr


BUSY_WARNING = "warning: other processes kept"  # (a test machine may be busy: the run is not wrong for it)


def test_bench_compares_modes_side_by_side(model_dir, head_dir, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("\n".join(f"def f{i}(x):\n    return x * {i} + {i}" for i in range(12)))
    out = tmp_path / "bench.json"
    result = nestling("bench", src, "--model", model_dir, "--head", head_dir, "--dtype", "float32",
                      "--per-file", 3, "--max-tokens", 10, "--modes", "ar,spec,eagle-ref", "--depth", 3, "--top-k", 3,
                      "--total-tokens", 8, "--peers", "--out", out)
    assert result.returncode == 0, result.stderr
    assert "identical" in result.stdout and "warning" not in result.stderr.replace(BUSY_WARNING, "")
    report = json.loads(out.read_text())
    modes = {m["mode"]: m for m in report["modes"]}
    assert set(modes) == {"ar", "spec", "eagle-ref", "hf-greedy", "hf-lookup"}
    assert report["settings"]["eagle_ref_tree"] == {"top_k": 3, "depth": 3, "total_tokens": 8, "min_prob": 0.0,
                                                    "sizer": None, "buckets": []}
    for mode in ("spec", "eagle-ref", "hf-greedy", "hf-lookup"):
        assert modes[mode]["identical_to_baseline"] == "3/3"
    assert modes["spec"]["speedup_vs_baseline"] is not None
    assert report["settings"]["draft_gate"] is True
    assert report["settings"]["packed_weights"] is False  # float32: packing is for bfloat16 only
    result = nestling("bench", src, "--model", model_dir, "--head", head_dir, "--dtype", "float32",
                      "--per-file", 3, "--max-tokens", 10, "--temperature", 0.8, "--seed", 5, "--out", out)
    assert result.returncode == 0, result.stderr
    assert "sampled (temperature 0.8, top-p 1.0, seeds 5 + prompt index)" in result.stdout
    report = json.loads(out.read_text())
    assert report["settings"]["sampling"] == {"temperature": 0.8, "top_p": 1.0, "seed": 5}
    assert {m["mode"]: m["identical_to_baseline"] for m in report["modes"]} == {"ar": "3/3", "spec": "3/3"}
    variants = tmp_path / "shapes.json"
    variants.write_text(json.dumps({"deep": {"all": {"top_k": 2, "depth": 6}}}))
    result = nestling("bench", src, "--model", model_dir, "--head", head_dir, "--dtype", "float32",
                      "--per-file", 3, "--max-tokens", 10, "--shape-variants", variants, "--seed", 4, "--out", out)
    assert result.returncode == 0, result.stderr
    assert "nestling bench: warning: --seed applies only when sampling" in result.stderr  # (greedy here)
    report = json.loads(out.read_text())
    assert {m["mode"]: m["identical_to_baseline"] for m in report["modes"]} == {"ar": "3/3", "spec": "3/3",
                                                                               "spec@deep": "3/3"}
    assert report["settings"]["shape_variants"]["deep"]["logic"]["depth"] == 6


def test_bench_lookup_reads_a_distilled_cache(tmp_path):
    import torch

    from nestling.daemon.training.dataset import save_shard
    from nestling.daemon.training.distill import DistilledSequence

    result = nestling("bench", "--target", "lookup")
    assert result.returncode == 2 and "--cache-dir" in result.stderr
    result = nestling("bench", "--target", "lookup", "--cache-dir", tmp_path)
    assert result.returncode == 2 and "no distilled shards" in result.stderr
    tokens = torch.tensor([7, 1, 2, 3, 9, 1, 2, 3, 9], dtype=torch.int32)
    (tmp_path / "train").mkdir()
    save_shard(tmp_path / "train" / "shard-00000.safetensors",
               [DistilledSequence(tokens, torch.zeros(9, 4, dtype=torch.bfloat16), 5)])
    out = tmp_path / "lookup.json"
    result = nestling("bench", "--target", "lookup", "--cache-dir", tmp_path, "--out", out)
    assert result.returncode == 0, result.stderr
    rows = {(r["n"], r["branch"]): r for r in json.loads(out.read_text())["rows"]}
    assert rows[(1, 0)]["first"] == 1.0 and rows[(3, 0)]["branches"] == 1


def typing_sources(tmp_path):
    """A tiny model that writes whole characters, and a folder with one Python file to type in."""
    model = save_tiny_model_folder(tmp_path / "model", never_stop=True, whole_characters=True)
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("\n".join(f"def f{i}(x):\n    return x * {i} + {i}" for i in range(12)))
    return model, src


def written_cost_profile(model, cache: Path, monkeypatch) -> Path:
    """A cost profile in `cache` for `model` with the untrained head in float32, as bench loads them, with a nearly
    flat verification curve: the trees are sized by it, not by a curve timed on a machine that may be busy (a 2-token
    forward of a tiny model once timed 13x a 1-token one, and no tree paid)."""
    from nestling.daemon.policy.cost_model import VERIFY_SIZES, CostProfile, profile_key, profile_path
    from nestling.daemon.runtime import load_runtime

    monkeypatch.setenv("NESTLING_CACHE_DIR", str(cache))
    runtime = load_runtime(str(model), "untrained", None, "float32", progress=False)
    key = profile_key(runtime.target, runtime.tree_source)
    path = profile_path(key)
    CostProfile(key, 300, {size: 10.0 + 0.01 * size for size in VERIFY_SIZES}, 0.5, {"at": "written by the test"}).save(path)
    return path


def test_bench_type_through_types_the_shown_completion_with_and_without_the_hint(tmp_path, monkeypatch):
    model, src = typing_sources(tmp_path)
    out = tmp_path / "typing.json"
    profile = written_cost_profile(model, tmp_path / "cache", monkeypatch)
    # no draft gate: it decides from timings, and a loaded machine could make it draft less in one setting
    result = nestling("bench", src, "--target", "type-through", "--model", model, "--head", "untrained",
                      "--dtype", "float32", "--per-file", 2, "--keystrokes", 3, "--max-tokens", 12, "--out", out,
                      "--no-draft-gate")
    assert list(profile.parent.iterdir()) == [profile]  # the run read the written profile: it timed none of its own
    assert result.returncode == 0, result.stderr
    assert "faster with the hint" in result.stdout
    report = json.loads(out.read_text())
    hint, no_hint = report["hint"]["after_a_keystroke"], report["no_hint"]["after_a_keystroke"]
    assert hint["requests"] == no_hint["requests"] == 6  # 2 positions x 3 keystrokes (a completion always shows)
    assert hint["same_completion_as_the_other_setting"] == 6  # float32: the hint never changes what is shown
    assert hint["tau"] > no_hint["tau"]
    result = nestling("bench", src, "--target", "type-through", "--model", model, "--keystrokes", 0)
    assert result.returncode == 2 and "--keystrokes must be at least 1" in result.stderr


def test_bench_type_through_compares_the_prefill_ahead(tmp_path):
    model, src = typing_sources(tmp_path)
    out = tmp_path / "ahead.json"
    result = nestling("bench", src, "--target", "type-through", "--compare", "ahead", "--pause-ms", 5000,
                      "--model", model, "--head", "untrained", "--dtype", "float32", "--per-file", 2,
                      "--keystrokes", 3, "--max-tokens", 12, "--out", out)
    assert result.returncode == 0, result.stderr
    assert "faster with the prefill ahead" in result.stdout and "after a 5000 ms pause" in result.stdout
    report = json.loads(out.read_text())
    ahead, no_ahead = report["ahead"]["after_a_keystroke"], report["no_ahead"]["after_a_keystroke"]
    assert ahead["requests"] == no_ahead["requests"] == 6
    assert ahead["same_completion_as_the_other_setting"] == 6  # float32: the prefill ahead never changes them
    # each keystroke typed the first character shown, which the prefill guessed, unless it was a line break that
    # the guess followed with the next line's indentation (as an auto-indenting editor would insert)
    rows = [r for r in report["requests"] if r["setting"] == "ahead"]
    shown = {(r["index"], r["keystroke"]): r["text"] for r in rows}
    guessed = [predicted_keystroke(shown[r["index"], r["keystroke"] - 1]) == shown[r["index"], r["keystroke"] - 1][0]
               for r in rows if r["keystroke"] > 0]
    assert [r["prepared_ahead"] for r in rows if r["keystroke"] > 0] == guessed and any(guessed)
    assert no_ahead["prepared_ahead"] == 0
    result = nestling("bench", src, "--target", "type-through", "--compare", "ahead", "--pause-ms", 5000, "--accept",
                      "--model", model, "--head", "untrained", "--dtype", "float32", "--per-file", 2,
                      "--keystrokes", 2, "--max-tokens", 12, "--out", out)
    assert result.returncode == 0, result.stderr
    assert "accepting the completion shown" in result.stdout
    ahead = json.loads(out.read_text())["ahead"]["after_a_keystroke"]
    assert ahead["requests"] == ahead["prepared_ahead"] == ahead["same_completion_as_the_other_setting"] == 4
    result = nestling("bench", src, "--target", "type-through", "--compare", "ahead", "--model", model, "--pause-ms",
                      -1)
    assert result.returncode == 2 and "--pause-ms must not be negative" in result.stderr


def test_the_command_line_parses_without_importing_torch():
    # `nestling serve --stop`, `--help`, and the argument parsing before `nestling lsp` starts stay instant:
    # each subcommand imports the model stack only in its run().
    check = ("import sys; from nestling.daemon.cli.main import build_parser; build_parser(); "
             "sys.exit('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", check], timeout=120).returncode == 0


def test_status_describes_prefills_on_opening_and_ahead_of_a_keystroke():
    from nestling.daemon.cli.status import describe
    from nestling.proto import completion_pb2 as pb

    lines = describe(pb.GetStatsResponse(model="m", prefills=2, prefilled_tokens=900, prefills_ahead=7,
                                         prefills_ahead_used=3), "unix:/run/daemon.sock", 42)
    prefills = next(line for line in lines if line.startswith("prefills"))
    assert prefills == ("prefills  2 files prepared on opening, 900 prompt tokens; "
                        "7 ahead of the next request, 3 of them used")


def test_status_says_why_the_cache_is_over_its_limit():
    """(QA: "cache 1.2 MiB of 1 MiB, 1 documents" read as a broken limit.)"""
    from nestling.daemon.cli.status import describe
    from nestling.proto import completion_pb2 as pb

    def cache_line(used, documents):
        lines = describe(pb.GetStatsResponse(model="m", cache_bytes=used, cache_documents=documents,
                                             cache_limit_bytes=2**20), "unix:/run/daemon.sock", 42)
        return next(line for line in lines if line.startswith("cache"))

    assert cache_line(2**19, 3) == "cache     0.5 MiB of 1 MiB, 3 documents"
    assert cache_line(int(1.2 * 2**20), 1) == ("cache     1.2 MiB of 1 MiB, 1 document (over the limit: the document "
                                               "asked last is kept whatever its size)")


@pytest.mark.parametrize("fields, says", [
    (dict(device="cpu", dtype="bfloat16", exact_rows=32, packed_weights=True), "bit for bit: trees of up to 32 tokens"),
    (dict(device="cpu", dtype="float32"), "in practice: trees verify as one block"),
    (dict(device="cuda:0", dtype="bfloat16"), "near-ties may part: trees verify as one block in bfloat16"),
    (dict(model="loading"), "unknown until the model is loaded"),
])
def test_status_says_how_exact_the_outputs_are(fields, says):
    from nestling.daemon.cli.status import describe
    from nestling.proto import completion_pb2 as pb

    lines = describe(pb.GetStatsResponse(**{"model": "m", **fields}), "unix:/run/daemon.sock", None)
    assert next(line for line in lines if line.startswith("exact")).startswith("exact     " + says)
    assert ("packed weights" in lines[1]) == bool(fields.get("packed_weights"))


def test_status_names_the_daemons_decoding_mode():
    """(Nothing said which --mode a running daemon decoded with.)"""
    from nestling.daemon.cli.status import describe
    from nestling.proto import completion_pb2 as pb

    def mode_line(**fields):
        lines = describe(pb.GetStatsResponse(**fields), "unix:/run/daemon.sock", None)
        return next(line for line in lines if line.startswith("mode "))

    assert mode_line(model="m", mode="lookup") == "mode      lookup"
    plain = describe(pb.GetStatsResponse(model="m", head="untrained", mode="ar", dtype="bfloat16", device="cpu"),
                     "unix:/run/daemon.sock", None)  # (QA: it spoke of the head and of trees, neither of them used)
    assert plain[1].endswith("head untrained (not used: --mode ar)")
    looked_up = describe(pb.GetStatsResponse(model="m", head="h", mode="lookup"), "unix:/run/daemon.sock", None)
    assert looked_up[1].endswith("head h (not used: --mode lookup)")
    assert "exact     by construction: plain decoding (--mode ar) verifies no trees" in plain
    assert "uptime    0 min 00 s; no completions yet" in plain and "latency   none measured yet (no completions)" in plain
    assert mode_line(model="loading") == "mode      unknown until the model is loaded"
    assert mode_line(model="m") == "mode      not reported (a daemon older than this client)"


def test_stats_carry_the_runtime_exactness_and_packing():
    from nestling.daemon.grpc_api.convert import stats_response

    from nestling.daemon.service.stats import ServiceStats

    snapshot = ServiceStats().snapshot()
    described = {"model": "m", "device": "cpu", "dtype": "bfloat16", "head": "h", "exact_rows": 32,
                 "packed_weights": True}
    response = stats_response(described, snapshot, (0, 0), 0)
    assert response.exact_rows == 32 and response.packed_weights
    loading = stats_response({"model": "loading", "device": "", "dtype": "", "head": ""}, snapshot, (0, 0), 0)
    assert loading.exact_rows == 0 and not loading.packed_weights and not loading.HasField("cost_profile")


def test_status_shows_the_cost_profile_and_whether_it_is_cached():
    from nestling.daemon.cli.status import describe
    from nestling.proto import completion_pb2 as pb

    def profile_line(**profile):
        stats = pb.GetStatsResponse(model="m", cost_profile=pb.CostProfile(**profile) if profile else None)
        return next(line for line in describe(stats, "unix:/run/daemon.sock", None) if line.startswith("profile"))

    assert profile_line() == "profile   not timed yet (at the first completion or prefill)"
    line = profile_line(verify_one_ms=59.3, verify_16_ms=92.7, draft_step_ms=6.31, measured_at="2026-12-06 10:20:00",
                        cached=True)
    assert line.startswith("profile   a verify forward 59 ms (one token) / 93 ms (16 tokens), a draft step 6.3 ms;"
                           " timed 2026-12-06 10:20:00, cached")
    busy = profile_line(verify_one_ms=16.2, verify_16_ms=200.0, measured_at="2026-12-04 09:00:00", cached=False)
    assert "draft step" not in busy and "other processes kept the CPU busy: not cached" in busy


def test_status_says_whether_the_daemon_runs_the_code_installed_now():
    from nestling.daemon.cli.status import describe
    from nestling.daemon.code_stamp import code_stamp
    from nestling.proto import completion_pb2 as pb

    def code_line(stamp):
        return describe(pb.GetStatsResponse(model="m", code_stamp=stamp), "unix:/run/daemon.sock", None)[-1]

    assert code_line(code_stamp()) == f"code      {code_stamp()}: the code installed now"
    stale = code_line("0.0.1+000000000000")
    assert stale.startswith("code      the nestling daemon runs code 0.0.1+000000000000, not the code installed now")
    assert "restart it" in stale


def test_serve_flags_turn_off_the_prefill_ahead_and_the_hint():
    from nestling.daemon.cli.main import build_parser
    from nestling.daemon.cli.serve import settings_from
    from nestling.daemon.service.config import load_config

    parser = build_parser()
    default, _ = load_config(settings_from(parser.parse_args(["serve"])), path=Path("/nonexistent/config.toml"))
    assert default.prefill_ahead and default.follow_last_completion
    flags = parser.parse_args(["serve", "--no-prefill-ahead", "--no-follow-last-completion"])
    config, sources = load_config(settings_from(flags), path=Path("/nonexistent/config.toml"))
    assert not config.prefill_ahead and not config.follow_last_completion
    assert sources["prefill_ahead"] == sources["follow_last_completion"] == "flag"


def test_train_head_refuses_unusable_settings_before_loading_anything(tmp_path):
    result = nestling("train-head", "--out", tmp_path / "out", "--eval-every", 0)
    assert result.returncode == 2 and "--eval-every must be at least 1, not 0" in result.stderr
    result = nestling("train-head", "--out", tmp_path / "out", "--fused-features", "y")
    assert result.returncode == 2 and "expected true or false, not 'y'" in result.stderr
    (tmp_path / "file").write_text("mine")
    result = nestling("train-head", "--out", tmp_path / "file")
    assert result.returncode == 2 and "exists and is not a folder" in result.stderr
    for flags, says in ((("--out", tmp_path / "file" / "out"), f"--out {tmp_path / 'file' / 'out'}: cannot make"),
                        (("--out", tmp_path / "out", "--cache-dir", tmp_path / "file" / "cache"), "--cache-dir ")):
        result = nestling("train-head", *flags)  # (a bare "[Errno 20] Not a directory" after the model loaded)
        assert result.returncode == 2 and says in result.stderr and "Not a directory" in result.stderr, result.stderr
    assert (tmp_path / "file").read_text() == "mine"


def test_train_head_help_explains_every_setting_from_the_comment_where_it_is_defined():
    from dataclasses import fields

    from nestling.daemon.cli.train_head import field_comments
    from nestling.daemon.training.config import DataConfig, TrainConfig

    for cls in (DataConfig, TrainConfig):
        comments = field_comments(cls)
        assert set(comments) == {f.name for f in fields(cls)}, "a setting without a comment"
    assert field_comments(TrainConfig)["eval_steps"].startswith("draft steps scored at each held-out evaluation")
    result = nestling("train-head", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert ("--max-steps MAX_STEPS optimizer steps at most (cosine decay to 10% over these); 0 = distil only, into "
            "--cache-dir (which it then needs), and score the starting head: no training (default: 2000)") in text
    assert "--eval-steps EVAL_STEPS draft steps scored at each held-out evaluation" in text and "(default: 6)" in text
    assert "--corpus PATH folders/globs; empty = the default corpus (repeatable)" in text


def test_bench_checks_its_outputs_sources_and_counts_before_it_runs(tmp_path):
    result = nestling("bench", "--out", tmp_path / "missing" / "report.json")
    assert result.returncode == 2 and "the folder" in result.stderr and "does not exist" in result.stderr
    result = nestling("bench", "--target", "open", tmp_path / "typo.py")
    assert result.returncode == 2 and f"{tmp_path / 'typo.py'}: no such file or folder" in result.stderr
    for flag in ("--limit", "--keystrokes", "--per-file", "--top-k", "--depth", "--total-tokens", "--max-tokens"):
        result = nestling("bench", flag, 0, *(("--target", "grpc") if flag == "--keystrokes" else ()))
        assert result.returncode == 2 and f"{flag} must be at least 1" in result.stderr, (flag, result.stderr)
    (tmp_path / "binary.py").write_bytes(b"x = 1\n\x00\x01\x02" * 20)
    for flags, message in ((("--target", "open", "--open-delay", -3), "--open-delay must not be negative"),
                           (("--target", "syntax", "--plot", tmp_path / "x.png"), "--target syntax has no plot"),
                           (("--target", "grpc", "--limit", 2), "--limit does not apply to --target grpc"),
                           ((tmp_path / "binary.py",), "does not look like text (it has NUL bytes)")):
        result = nestling("bench", *flags)  # (the open delay was checked after the first prefill; the others ignored)
        assert result.returncode == 2 and message in result.stderr, result.stderr
    for flags, message in ((("--temperature", 0.5, "--peers"), "decode greedily only"),
                           (("--top-p", 0), "--top-p must be in (0, 1]"), (("--seed", -1), "--seed must be in"),
                           (("--target", "syntax", "--seed", 3), "apply to the decoding modes, not --target syntax"),
                           (("--target", "syntax", __file__), "--target syntax takes no SOURCES (it edits 5,000-line"),
                           (("--target", "lookup", __file__), "--target lookup takes no SOURCES"),
                           (("--modes", ""), "--modes names no mode: give one or more of"),  # ("unknown modes []")
                           (("--modes", "spec,fast"), "unknown mode fast (known: ")):
        result = nestling("bench", *flags)
        assert result.returncode == 2 and message in result.stderr, result.stderr
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "region.json").write_text('{"x": {"loops": {"depth": 3}}}')
    for file, message in (("absent.json", "cannot read it"), ("bad.json", "not valid JSON"),
                          ("region.json", "unknown regions ['loops']")):
        result = nestling("bench", "--shape-variants", tmp_path / file)
        assert result.returncode == 2 and message in result.stderr, result.stderr
    result = nestling("profile", "--plot", tmp_path / "missing" / "curve.png")
    assert result.returncode == 2 and "does not exist" in result.stderr
    for command, plot, says in (("profile", tmp_path, "a folder; give a file name"),
                                ("profile", tmp_path / "curve", "give a file name ending in .png"),
                                ("bench", tmp_path / "speed.txt", "give a file name ending in .png")):
        result = nestling(command, "--plot", plot)  # (matplotlib wrote PATH.png, or refused, after the measuring)
        assert result.returncode == 2 and says in result.stderr, result.stderr


def test_bench_refuses_flags_it_would_ignore_and_trees_that_would_not_fit_before_loading(tmp_path):
    """(QA: --by-region with --target type-through, --top-k without eagle-ref, --head none with --ablation and
    --max-tokens 1 ran, or failed after the model loaded; a 100,000-node eagle-ref tree took the machine's memory.)"""
    (tmp_path / "empty.py").write_text("")
    (tmp_path / "existing.json").write_text("kept")
    (tmp_path / "nothing").mkdir()
    for flags, message in (
            (("--target", "type-through", "--by-region", "--peers"),
             "--target type-through does not take --peers (for --target engine), --by-region (for --target engine): "
             "drop them"),
            (("--target", "syntax", "--model", "m"), "--target syntax does not take --model (for --target engine or "
                                                     "type-through)"),
            (("--target", "type-through", "--pause-ms", 10), "--pause-ms applies to --compare ahead only"),
            (("--top-k", 3), "--top-k shapes the trees of eagle-ref or eagle-latency, which --modes does not run: add "
                             "one (or --ablation)"),
            (("--total-tokens", 8, "--modes", "ar,eagle-latency"), "--total-tokens shapes the trees of eagle-ref, "
                                                                   "which --modes does not run"),
            (("--total-tokens", 100000, "--modes", "ar,eagle-ref"), "--total-tokens 100,000: bench takes at most 1,024"),
            (("--depth", 65, "--modes", "ar,eagle-ref"), "--depth 65: bench takes at most 64"),
            (("--head", "none", "--ablation"), "--head none: eagle-ref, eagle-latency, eagle-syntax draft with a head "
                                               "(or a draft model); give one, or --modes ar,lookup,spec"),
            (("--head", "none", "--modes", "eagle-ref"), "draft with a head (or a draft model); give one\n"),
            # (review: without --head, the default head, this was refused as --head none)
            (("--ablation", "--shape-variants", tmp_path / "absent.json"), "absent.json: cannot read it"),
            (("--target", "grpc", "--no-draft-gate"), "does not take --no-draft-gate (for --target engine or "
                                                      "type-through)"),
            (("--target", "open", tmp_path / "nothing"), "no source files in"),
            (("--max-tokens", 1), "--max-tokens must be at least 2: decode tokens/s are timed after the first token"),
            (("--out", "/proc/report.json"), "--out /proc/report.json: cannot write it"),
            (("--out", tmp_path / "empty.py" / "r.json"), f"{tmp_path / 'empty.py'} is a file, not a folder"),
            (("--out", ""), "--out needs a file name"),
            (("--target", "open", tmp_path / "empty.py"), "is empty: there is nothing to complete in it"),
            (("--target", "grpc", "--file", tmp_path / "absent.py"), "--file: cannot read"),
            ((tmp_path / "absent.jsonl",), "absent.jsonl: cannot read it (No such file or directory)")):
        result = nestling("bench", *flags, "--out", tmp_path / "existing.json") if "--out" not in flags \
            else nestling("bench", *flags)
        assert result.returncode == 2 and message in result.stderr, (flags, result.stderr)
        assert "Traceback" not in result.stderr and "loading" not in result.stderr.lower()
    assert (tmp_path / "existing.json").read_text() == "kept"  # (checked for writing, not written)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.py", "existing.json", "nothing"]


def test_bench_prints_its_table_before_writing_out_and_keeps_what_an_interrupted_run_measured(model_dir, head_dir,
                                                                                              tmp_path, monkeypatch,
                                                                                              capsys):
    """(Ctrl-C lost every prompt measured, without a word; an --out that could not be written lost the table.)"""
    from nestling.daemon.bench import runner
    from nestling.daemon.cli.main import main

    real = runner.run_bench

    def interrupted(runtime, modes, prompts, *args, **kwargs):  # as Ctrl-C during the third prompt leaves it
        results = real(runtime, modes, prompts[:2], *args, **kwargs)
        raise runner.BenchInterrupted(results, 2)

    monkeypatch.setattr(runner, "run_bench", interrupted)
    src = tmp_path / "a.py"
    src.write_text("\n".join(f"def f{i}(x):\n    return x * {i} + {i}" for i in range(12)))
    out = tmp_path / "bench.json"
    flags = ["bench", str(src), "--model", str(model_dir), "--head", str(head_dir), "--dtype", "float32",
             "--per-file", "4", "--max-tokens", "6"]
    assert main([*flags, "--out", str(out)]) == 130
    said = capsys.readouterr()
    assert f"nestling bench: interrupted after 2 of 4 prompts: the results below are theirs (and go to {out})" \
        in said.err
    assert "2 prompts, up to 6 new tokens each" in said.out and "identical" in said.out
    report = json.loads(out.read_text())
    assert report["settings"]["interrupted_after"] == "2 of 4 prompts" and report["settings"]["prompts"] == 2
    assert [m["prompts"] for m in report["modes"]] == [2, 2] and "busy_elsewhere" in report["environment"]

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", no_space)
    assert main([*flags, "--out", str(out)]) == 2
    said = capsys.readouterr()
    assert "2 prompts, up to 6 new tokens each" in said.out  # the table, printed before the write that failed
    assert f"--out {out}: cannot write it (No space left on device); the results are printed above" in said.err


def test_verbose_goes_after_the_command_too_and_ctrl_c_says_it_stopped(monkeypatch, capsys):
    """(QA: `nestling bench ... -v` was an unrecognized argument; Ctrl-C ended a command without a word.)"""
    from nestling.daemon.cli import config
    from nestling.daemon.cli.main import build_parser, main

    assert build_parser().parse_args(["config", "-v"]).verbose is True
    assert build_parser().parse_args(["-v", "config"]).verbose is True
    assert build_parser().parse_args(["config"]).verbose is False

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(config, "run", interrupted)
    assert main(["config"]) == 130 and "nestling config: interrupted" in capsys.readouterr().err


def test_profile_without_a_head_says_it_timed_no_draft_step(model_dir):
    result = nestling("profile", "--model", model_dir, "--head", "none", "--dtype", "float32", "--context", 24,
                      "--repeats", 1)
    assert result.returncode == 0, result.stderr
    assert "one draft step: none timed (no draft head: --head none)" in result.stdout  # (was "0.00 ms (0.0% of ...")


def test_profile_times_the_curve_checks_it_and_saves_it(model_dir, head_dir):
    result = nestling("profile", "--model", model_dir, "--head", head_dir, "--dtype", "float32", "--context", 24,
                      "--repeats", 2, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert Path(report["path"]).is_file() and report["attempt"] in (1, 2, 3)
    assert set(report["check_ms"]) == {"1", "8", "16"} and report["check_spread"] >= 1.0
    costs = [report["verify_ms"][w] for w in sorted(report["verify_ms"], key=int)]
    assert costs == sorted(costs) and costs[0] > 0
    again = nestling("profile", "--model", model_dir, "--head", head_dir, "--dtype", "float32", "--context", 24,
                     "--repeats", 2, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["previous_verify_ms"] == report["verify_ms"]  # the curve it replaced, shown
    shown = nestling("profile", "--model", model_dir, "--head", head_dir, "--dtype", "float32", "--context", 24,
                     "--repeats", 1)
    assert shown.returncode == 0 and "\nwas: " in shown.stdout, shown.stderr
    beyond = nestling("profile", "--model", model_dir, "--head", head_dir, "--dtype", "float32", "--context", 4090)
    assert beyond.returncode == 2 and "--context 4090 and trees of up to" in beyond.stderr \
        and "exceed the model's 4096 positions" in beyond.stderr, beyond.stderr


def test_version_prints_the_package_version_and_code_stamp_without_loading_the_model_stack():
    import re

    from nestling.daemon.code_stamp import installed_version

    for flag in ("--version", "-V"):
        result = nestling(flag)
        assert result.returncode == 0, result.stderr
        # (the stamp itself is code_stamp(), a digest of the files as they are: not compared with this process's,
        # computed once, before a file may have changed)
        version = re.escape(installed_version())
        assert re.fullmatch(rf"nestling {version} \(code {version}\+[0-9a-f]{{12}}\)\n", result.stdout), result.stdout
    check = ("import sys; from nestling.daemon.cli.main import main\n"
             "try:\n    main(['--version'])\nexcept SystemExit as exit:\n    assert exit.code in (0, None)\n"
             "sys.exit('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", check], capture_output=True, timeout=120).returncode == 0


def test_the_dtype_help_says_the_default_the_loader_picks():
    text = " ".join(nestling("complete", "--help").stdout.split())
    assert "default: bfloat16 where the hardware supports it, else float16 on a GPU and float32 on a CPU" in text


def test_a_head_config_no_head_can_be_built_from_or_for_another_vocabulary_is_one_line(model_dir, head_dir, source,
                                                                                         tmp_path):
    import shutil

    config = json.loads((head_dir / "config.json").read_text())
    for fields, message in (({"num_attention_heads": 0}, "not a usable head config: num_attention_heads must be a "
                                                         "positive integer, not 0"),
                            ({"vocab_size": 1000}, f"vocab_size 1000 does not match the target's vocabulary "
                                                   f"({config['vocab_size']})")):
        head = shutil.copytree(head_dir, tmp_path / f"head-{len(list(tmp_path.iterdir()))}")
        (head / "config.json").write_text(json.dumps({**config, **fields, "pad_token_id": 5000}))
        result = nestling("complete", source, "--line", 1, "--col", 1, "--model", model_dir, "--head", head,
                          "--max-tokens", 2)
        assert result.returncode == 2 and f"{head / 'config.json'}: {message}" in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "token_id" not in result.stderr  # no library warnings


def test_complete_post_processes_as_the_daemon_does_and_raw_prints_the_models_text(model_dir, source):
    from nestling.daemon.context.fim import split_at
    from nestling.daemon.context.languages import find_language
    from nestling.daemon.context.syntax import SyntaxDocument
    from nestling.daemon.service.postprocess import cursor_context, finalize, line_mode

    text = source.read_text()
    flags = ("--model", model_dir, "--head", "none", "--dtype", "float32", "--max-tokens", 24, "--json")
    shown_differs = []
    for line, col in ((5, 11), (4, 12)):  # mid-line (one line), and after a block opener (a block)
        raw = nestling("complete", source, "--line", line, "--col", col, *flags, "--raw")
        spec = nestling("complete", source, "--line", line, "--col", col, *flags)
        ar = nestling("complete", source, "--line", line, "--col", col, *flags, "--mode", "ar")
        assert raw.returncode == spec.returncode == ar.returncode == 0, raw.stderr + spec.stderr + ar.stderr
        raw, spec, ar = json.loads(raw.stdout), json.loads(spec.stdout), json.loads(ar.stdout)
        assert raw["line_mode"] == "raw" and raw["stats"]["tokens"] == 24  # the model's text, up to --max-tokens
        prefix, suffix = split_at(text, line - 1, col - 1)
        language = find_language(None, str(source))
        context = cursor_context(prefix, suffix, SyntaxDocument(text, language).region_at(len(prefix)), language)
        shape = line_mode("auto", context)
        assert spec["line_mode"] == ar["line_mode"] == shape
        assert spec["text"] == ar["text"] == finalize(raw["text"], context, shape)  # what the daemon would show
        shown_differs.append(spec["text"] != raw["text"])
    assert all(shown_differs)  # (the tiny model writes a line break, then a NUL, at these positions)
    result = nestling("complete", source, "--line", 4, "--col", 12, *flags[:-1], "--line-mode", "single")
    assert result.returncode == 0 and "line mode single" in result.stderr, result.stderr
    result = nestling("complete", source, "--line", 4, "--col", 12, *flags, "--raw", "--line-mode", "multi")
    assert result.returncode == 2 and "--raw does not cut it" in result.stderr


def test_seed_and_top_p_with_greedy_decoding_are_a_warning(model_dir, source):
    flags = ("complete", source, "--line", 5, "--col", 5, "--model", model_dir, "--head", "none", "--max-tokens", 2)
    result = nestling(*flags, "--seed", 3, "--top-p", 0.5)
    assert result.returncode == 0, result.stderr
    assert ("nestling complete: warning: --seed and --top-p apply only when sampling (--temperature above 0); greedy "
            "decoding ignores them") in result.stderr
    result = nestling(*flags, "--seed", 3)
    assert "warning: --seed applies only when sampling" in result.stderr and "ignores it" in result.stderr
    result = nestling(*flags, "--seed", 3, "--temperature", 0.7)
    assert result.returncode == 0 and "warning" not in result.stderr


def test_a_byte_order_mark_is_no_column_and_no_text(model_dir, tmp_path):
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbfx = 1\n")
    flags = ("--model", model_dir, "--head", "none", "--max-tokens", 3, "--raw", "--json")
    result = nestling("complete", path, "--line", 1, "--col", 7, *flags)
    assert result.returncode == 2 and "column 7 is past the end of line 1 (it has 5 characters)" in result.stderr
    with_bom = nestling("complete", path, "--line", 1, "--col", 6, *flags)
    path.write_bytes(b"x = 1\n")
    without = nestling("complete", path, "--line", 1, "--col", 6, *flags)
    assert with_bom.returncode == without.returncode == 0, with_bom.stderr
    first, second = json.loads(with_bom.stdout), json.loads(without.stdout)
    assert first["text"] == second["text"] and first["stats"]["prompt_tokens"] == second["stats"]["prompt_tokens"]


def test_crlf_and_a_lone_cr_end_a_line_as_editors_count_lines(model_dir, tmp_path):
    path = tmp_path / "mac.py"
    flags = ("--model", model_dir, "--head", "none", "--max-tokens", 3, "--raw", "--json")
    path.write_bytes(b"import os\n\ndef f(x):\n    ")
    lf = nestling("complete", path, "--line", 4, "--col", 5, *flags)
    # (a lone-CR file was one line: "line 4 is outside the document"; a CRLF file gave the model other text)
    for line_break in (b"\r", b"\r\n"):
        path.write_bytes(b"import os\n\ndef f(x):\n    ".replace(b"\n", line_break))
        other = nestling("complete", path, "--line", 4, "--col", 5, *flags)
        assert lf.returncode == other.returncode == 0, other.stderr
        assert json.loads(other.stdout)["text"] == json.loads(lf.stdout)["text"]
        assert json.loads(other.stdout)["stats"]["prompt_tokens"] == json.loads(lf.stdout)["stats"]["prompt_tokens"]
    result = nestling("complete", path, "--line", 3, "--col", 11, *flags)  # (the CR was counted as a column)
    assert result.returncode == 2 and "column 11 is past the end of line 3 (it has 9 characters)" in result.stderr


@pytest.mark.parametrize("content, says", [
    (b"\x7fELF\x02\x01\x01\x00\x00\x00", "(it has NUL bytes)"),
    (bytes(range(128, 256)) * 4, "(512 of its first 512 characters are not UTF-8)"),
])
def test_a_binary_file_is_refused_before_the_model_loads(tmp_path, content, says):
    path = tmp_path / "program.py"
    path.write_bytes(content)
    result = nestling("complete", path, "--line", 1, "--col", 1, "--model", tmp_path / "no-model")
    assert result.returncode == 2 and f"{path} does not look like text {says}" in result.stderr, result.stderr


def test_a_model_whose_positions_the_prompt_fills_says_so_instead_of_advising_max_tokens_0(tmp_path, source):
    """(QA: max_position_embeddings 2 gave "give --max-tokens 0 at most", which was refused in turn.)"""
    folder = save_tiny_model_folder(tmp_path / "short")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 2}))
    result = nestling("complete", source, "--line", 5, "--col", 5, "--model", folder, "--head", "none")
    assert result.returncode == 2 and "tokens fill the 2 positions of short: there is no room for a completion" in \
        result.stderr, result.stderr


def test_a_latin1_character_or_two_is_still_text(model_dir, tmp_path):
    path = tmp_path / "old.py"
    path.write_bytes(b"# caf\xe9\nx = 1\n")
    result = nestling("complete", path, "--line", 2, "--col", 6, "--model", model_dir, "--head", "none",
                      "--max-tokens", 2)
    assert result.returncode == 0, result.stderr
    assert f"warning: {path} is not UTF-8; read as Windows-1252" in result.stderr


def test_a_file_that_is_not_utf8_is_read_as_latin1_or_said_to_hold_replacements(tmp_path, capsys):
    """(`"caf\\xe9"` was read as "caf\ufffd", and completions that copied it wrote U+FFFD into the file.)"""
    from nestling.daemon.cli.complete import read_source

    latin1 = tmp_path / "latin1.py"
    latin1.write_bytes(b'names = ["caf\xe9", "na\xefve"]\n')
    assert read_source(latin1) == 'names = ["caf\u00e9", "na\u00efve"]\n'
    mixed = tmp_path / "mixed.py"
    mixed.write_bytes('# caf\u00e9 \u2014 \u00e9t\u00e9\nx = "\u00e9"\n'.encode() + b"y = '\xe9'\n")  # UTF-8, one stray byte
    assert read_source(mixed) == '# caf\u00e9 \u2014 \u00e9t\u00e9\nx = "\u00e9"\ny = \'\ufffd\'\n'
    err = capsys.readouterr().err
    assert f"{latin1} is not UTF-8; read as Windows-1252" in err and f"{mixed} has 1 byte that is not UTF-8" in err
    bom = tmp_path / "bom.py"  # (found by review: a byte order mark read as Latin-1 was three characters of text)
    bom.write_bytes(b"\xef\xbb\xbfname = 'caf\xe9'\n")
    assert read_source(bom) == "name = 'caf\ufffd'\n"
    quotes = tmp_path / "quotes.py"
    quotes.write_bytes(b"s = '\x93quoted\x94'\n")  # Windows-1252's curly quotes
    assert read_source(quotes) == "s = '\u201cquoted\u201d'\n"
    capsys.readouterr()
    plain = tmp_path / "replacement.py"
    plain.write_text("x = '\ufffd'\n")  # U+FFFD written in the file: nothing to say
    assert read_source(plain) == "x = '\ufffd'\n" and capsys.readouterr().err == ""


class _Stdin(io.TextIOWrapper):
    """Standard input holding `data`, a terminal or not."""

    def __init__(self, data: bytes, terminal: bool):
        super().__init__(io.BytesIO(data))
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


@pytest.mark.parametrize("terminal", [True, False])
def test_complete_dash_on_a_terminal_says_how_to_end_the_source(monkeypatch, capsys, terminal):
    """(`complete -` typed at a terminal waited without a word, like a hang.)"""
    from nestling.daemon.cli.complete import STDIN, read_source

    monkeypatch.setattr(sys, "stdin", _Stdin(b"def f():\n    return 1\n", terminal))
    assert read_source(STDIN) == "def f():\n    return 1\n"
    said = "reading the source from the terminal; end it with Ctrl-D on a line of its own"
    assert (said in capsys.readouterr().err) == terminal


@pytest.mark.parametrize("text, line, col, message", [
    ("x = 1", 3, 1, "line 3 is outside the document (it has 1 line)"),
    ("x", 1, 5, "column 5 is past the end of line 1 (it has 1 character)"),
    ("x\n", 4, 1, "line 4 is outside the document (it has 2 lines)"),
    ("x\n", 0, 1, "line 0 is outside the document (it has 2 lines, which start at 1)"),
])
def test_positions_outside_the_file_say_its_size_in_plain_words(tmp_path, text, line, col, message):
    path = tmp_path / "short.py"
    path.write_text(text)
    result = nestling("complete", path, "--line", line, "--col", col, "--model", tmp_path / "no-model")
    assert result.returncode == 2 and f"error: {message}" in result.stderr, result.stderr


def test_a_cache_dir_that_is_a_file_is_named_as_the_variable(model_dir, source, tmp_path):
    import os

    (tmp_path / "afile").write_text("")
    env = dict(os.environ, NESTLING_CACHE_DIR=str(tmp_path / "afile"))
    result = nestling("complete", source, "--line", 1, "--col", 1, "--model", model_dir, "--max-tokens", 1, env=env)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr  # (a model folder needs no
    # cache: the completion is given, and the cost profile not kept, with a warning naming the variable)
    assert (f"the cost profile is timed but not kept: $NESTLING_CACHE_DIR is '{tmp_path / 'afile'}', but "
            f"{tmp_path / 'afile'} is a file, not a folder: set $NESTLING_CACHE_DIR to a folder") in result.stderr


def test_train_head_refuses_head_and_values_that_would_waste_hours(tmp_path):
    out = tmp_path / "out"
    result = nestling("train-head", "--out", out, "--head", "somewhere")
    assert result.returncode == 2 and "drop --head (--init-head DIR starts the training from a trained head)" in \
        result.stderr
    assert "--head" not in nestling("train-head", "--help").stdout.replace("--init-head", "")
    for flags, message in ((("--noise", "nan"), "--noise must be a finite number, not negative, not nan"),
                           (("--step-decay", "-1"), "--step-decay must be a finite number"),
                           (("--reg-weight", "inf"), "--reg-weight must be a finite number"),
                           (("--cls-weight", "nan"), "--cls-weight must be a finite number"),
                           (("--prompt-weight", "-0.5"), "--prompt-weight must be a finite number"),
                           (("--max-steps", 0), "--max-steps 0 distils only and trains nothing: give --cache-dir")):
        result = nestling("train-head", "--out", out, *flags)
        assert result.returncode == 2 and message in result.stderr, result.stderr
    assert not out.exists()


def test_train_head_refuses_an_out_folder_of_something_else_before_loading_anything(tmp_path):
    """(A project folder given as --out had checkpoint.pt and head/ written among its files without a word.)"""
    project = tmp_path / "project"
    for name in ("main.py", "README.md", "setup.py", "lib/util.py", "docs/index.md"):
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text("mine")
    result = nestling("train-head", "--out", project)
    assert result.returncode == 2, result.stderr
    assert (f"--out {project}: holds README.md, docs/, lib/, main.py and 1 more, not a train-head run's files; give a "
            "new or empty folder") in result.stderr
    head = tmp_path / "head"
    head.mkdir()
    (head / "config.json").write_text('{"num_hidden_layers": 1}')
    (head / "model.safetensors").write_text("")
    result = nestling("train-head", "--out", head)
    assert result.returncode == 2 and "is a head's folder" in result.stderr, result.stderr
    assert f"(--init-head {head} fine-tunes that head)" in result.stderr
    assert sorted(p.name for p in head.iterdir()) == ["config.json", "model.safetensors"]


def test_an_out_folder_of_a_run_or_holding_the_cache_is_taken_and_one_that_cannot_be_written_is_refused(tmp_path,
                                                                                                        monkeypatch):
    import errno
    import tempfile

    from nestling.daemon.cli.train_head import check_out_folder

    run = tmp_path / "run"
    for name in ("head/config.json", "checkpoint.pt", "checkpoint.pt.tmp", "draft_vocab.pt", "training.json",
                 "learning_curve.json", ".DS_Store", "data/cache/train/manifest.json", "train.log", "nohup.out",
                 "train.log.1", "log.txt", "train_log.txt"):
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text("")
    check_out_folder(run, str(run / "data" / "cache"))  # a run's own files, and the folder its cache is in
    check_out_folder(run / "data", None)  # a cache an earlier sitting kept there (QA: it was "holds cache/")
    check_out_folder(run, None)  # and one deeper in (review: "holds data/")
    check_out_folder(run / "data" / "cache", str(run / "data" / "cache"))  # --out and --cache-dir one folder (QA)
    for stranger in ("notes.txt", ".git/config"):  # (QA: both were taken)
        (run / stranger).parent.mkdir(exist_ok=True)
        (run / stranger).write_text("")
        with pytest.raises(ValueError, match=f"holds {stranger.split('/')[0] + '/' * ('/' in stranger)} beside a "
                                             "train-head run's files; move .* away to resume the run there"):
            check_out_folder(run, str(run / "data" / "cache"))
        (run / stranger).unlink()
    (run / ".git").rmdir()
    with pytest.raises(ValueError, match="--cache-dir .*run/head/cache: lies in the head's folder"):
        check_out_folder(run, str(run / "head" / "cache"))
    model = tmp_path / "model"  # (QA: the cache's shards were written into the target model's folder)
    model.mkdir()
    (model / "config.json").write_text('{"num_hidden_layers": 24}')
    with pytest.raises(ValueError, match="--cache-dir .*model: is a model's folder"):
        check_out_folder(tmp_path / "new", str(model))
    with pytest.raises(ValueError, match=r"--out .*model: is a model's folder \(it holds config.json\), not a "
                                         r"train-head run's; give a new folder$"):
        check_out_folder(model, None)  # (no --init-head hint: a model is no head to fine-tune)

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    writable = tempfile.TemporaryFile
    monkeypatch.setattr(tempfile, "TemporaryFile", lambda dir: read_only() if Path(dir).name == "head" else
                        writable(dir=dir))
    with pytest.raises(ValueError, match=f"--out {run}: cannot write in its head/ \\(Read-only file system\\)"):
        check_out_folder(run, str(run / "data" / "cache"))
    monkeypatch.setattr(tempfile, "TemporaryFile", read_only)
    with pytest.raises(ValueError, match=f"--out {run}: cannot write there \\(Read-only file system\\)"):
        check_out_folder(run, str(run / "data" / "cache"))
    (tmp_path / "afile").write_text("")
    with pytest.raises(ValueError, match="--cache-dir .*afile: exists and is not a folder"):
        check_out_folder(tmp_path / "new", str(tmp_path / "afile"))


def test_bench_refuses_a_mode_named_twice():
    result = nestling("bench", "humaneval", "--limit", 2, "--max-tokens", 8, "--modes", "ar,spec,ar")
    assert result.returncode == 2 and "--modes names ar more than once: give each mode once" in result.stderr


def test_config_takes_only_what_the_commands_take_and_a_named_file_must_be_there(tmp_path):
    import os

    file = tmp_path / "config.toml"
    env = dict(os.environ, NESTLING_CONFIG=str(file))
    for line, message in (('dtype = "int8"', "setting dtype must be one of bfloat16, float32, float16"),
                          ('device = "tpu"', "setting device must be cpu, cuda or cuda:N, not 'tpu'"),
                          ('tcp = "not-an-address"', "setting tcp 'not-an-address': expected HOST:PORT"),
                          ("max_tokens_limit = 100000000000000000000", "setting max_tokens_limit must be at most")):
        file.write_text(line + "\n")
        result = nestling("config", env=env)
        assert result.returncode == 2 and f"{file}: {message}" in result.stderr, result.stderr
    file.write_text("")
    for flags, message in ((("--device", "tpu"), "--device must be cpu, cuda or cuda:N, not 'tpu'"),
                           (("--max-tokens", 5000), "--max-tokens 5,000 exceeds setting max_tokens_limit 1,024"),
                           (("--max-tokens", 0), "--max-tokens must be at least 1, not 0")):
        result = nestling("config", *flags, env=env)
        assert result.returncode == 2 and message in result.stderr, result.stderr
    assert nestling("config", "--max-tokens", 1024, env=env).returncode == 0
    file.unlink()
    for command in ("config", "serve"):  # (serve refuses before it loads a model or takes the socket)
        result = nestling(command, env=env)
        assert result.returncode == 2 and f"{file}: no such file ($NESTLING_CONFIG names it" in result.stderr
    env["NESTLING_CONFIG"] = str(tmp_path)
    result = nestling("config", env=env)
    assert result.returncode == 2 and f"{tmp_path}: not a file" in result.stderr
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "home"))
    env.pop("NESTLING_CONFIG", None)
    result = nestling("config", env=env)  # the default location, missing: the defaults, silently
    assert result.returncode == 0 and result.stderr == "" and "# config file: " in result.stdout


@pytest.mark.parametrize("wait", ["0", "-1", "nan", "soon"])
def test_serve_wait_takes_seconds_above_zero(wait, tmp_path):
    result = nestling("serve", "--stop", "--wait", wait, env=dict(os.environ, XDG_RUNTIME_DIR=str(tmp_path)))
    assert result.returncode == 2 and "argument --wait:" in result.stderr and "draining" not in result.stdout


def test_config_prints_lines_a_config_file_takes_and_the_token_from_the_environment(tmp_path):
    import tomllib

    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "home"), NESTLING_TOKEN="from-env")
    env.pop("NESTLING_CONFIG", None)
    result = nestling("config", "--max-tokens", 32, env=env)
    assert result.returncode == 0, result.stderr
    assert "(none there: the defaults)" in result.stdout.splitlines()[0]
    settings = tomllib.loads(result.stdout)  # pasted into config.toml as it is
    assert settings["max_tokens"] == 32 and settings["draft_gate"] is True and settings["mode"] == "spec"
    assert "token" not in settings and "model" not in settings  # (a setting not set, or the token, is a comment: QA,
    # a `token = "***"` pasted back set the token to "***")
    token_line = next(line for line in result.stdout.splitlines() if line.startswith("# token"))
    assert "= (set, not shown)" in token_line and token_line.endswith("# $NESTLING_TOKEN")
    assert "from-env" not in result.stdout
    as_json = nestling("config", "--json", env=env)
    assert json.loads(as_json.stdout)["settings"]["token"] == "***" and "from-env" not in as_json.stdout
    report = json.loads(as_json.stdout)  # its sources in the settings' order (it was another order each run)
    assert list(report["sources"]) == [key for key in report["settings"] if key in report["sources"]]
    (tmp_path / "home" / "nestling").mkdir(parents=True)
    (tmp_path / "home" / "nestling" / "config.toml").symlink_to(tmp_path / "dotfiles" / "nestling.toml")
    linked = nestling("config", env=env)  # (QA: a link to nothing read as "none there", without a word)
    assert linked.returncode == 0 and "config.toml is a symbolic link to " in linked.stderr \
        and "which is not there: the defaults apply" in linked.stderr, linked.stderr


def test_config_takes_every_setting_flag_serve_takes_and_the_token_flag_before_the_environment(tmp_path):
    """(`config` took only --max-tokens, --socket, --tcp and the model options: `config --mode lookup` was refused.)"""
    from nestling.daemon.cli.main import build_parser

    def flags(command):
        parser = build_parser()
        sub = next(a for a in parser._actions if a.dest == "command").choices[command]
        return {flag for action in sub._actions for flag in action.option_strings}

    assert flags("serve") - flags("config") == {"--detach", "--stop", "--restart", "--wait"}
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "home"), NESTLING_TOKEN="from-env")
    env.pop("NESTLING_CONFIG", None)
    result = nestling("config", "--json", "--mode", "lookup", "--no-draft-gate", "--cache-limit-mb", 64,
                      "--log-level", "debug", "--token", "from-flag", env=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert {key: report["settings"][key] for key in ("mode", "draft_gate", "cache_limit_mb", "log_level")} == \
        {"mode": "lookup", "draft_gate": False, "cache_limit_mb": 64, "log_level": "debug"}
    assert report["sources"]["token"] == "flag" and report["sources"]["mode"] == "flag"  # (as serve: flag, then env)
    assert "warning: a --token on the command line is visible to every local user" in result.stderr


def test_train_head_that_fails_before_writing_leaves_no_folder_it_made(tmp_path, model_dir):
    (tmp_path / "corpus").mkdir()
    for out, cache in ((tmp_path / "run" / "out", tmp_path / "cache"), (tmp_path / "run", tmp_path / "run" / "cache")):
        result = nestling("train-head", "--out", out, "--cache-dir", cache, "--corpus", tmp_path / "corpus",
                          "--model", model_dir, "--dtype", "float32")
        assert result.returncode == 2 and "the training corpus is empty" in result.stderr, result.stderr
        assert not (tmp_path / "run").exists() and not (tmp_path / "cache").exists()


def test_complete_offers_no_half_written_character_raw_or_not(tmp_path):
    """(QA: cut by --max-tokens after the first of its two byte tokens, an "é" was printed as U+FFFD.)"""
    model = save_split_character_model(tmp_path / "model")
    (tmp_path / "a.py").write_text('x = "\n')
    for raw in ((), ("--raw",)):
        result = nestling("complete", tmp_path / "a.py", "--line", 1, "--col", 6, "--model", model, "--head", "none",
                          "--dtype", "float32", "--max-tokens", 3, "--json", *raw)
        assert result.returncode == 0 and json.loads(result.stdout)["text"] == "é", result.stderr


def test_complete_reads_stdin_for_a_dash_with_the_language_given(model_dir, source):
    """(`complete -` looked for a file named "-".)"""
    flags = ("--line", 5, "--col", 5, "--model", model_dir, "--head", "none", "--dtype", "float32", "--max-tokens", 6,
             "--json")
    named = nestling("complete", source, *flags)
    run = [sys.executable, "-m", "nestling.daemon.cli.main", "complete", "-"]
    piped = subprocess.run([*run, "--language", "python", *map(str, flags)], input=source.read_text(),
                           capture_output=True, text=True, timeout=300)
    assert named.returncode == piped.returncode == 0, piped.stderr
    assert {k: json.loads(piped.stdout)[k] for k in ("text", "region")} == \
        {k: json.loads(named.stdout)[k] for k in ("text", "region")}
    unnamed = subprocess.run([*run, *map(str, flags)], input=source.read_text(), capture_output=True, text=True,
                             timeout=300)
    assert unnamed.returncode == 0 and "warning: stdin: give --language (those with one: c, cpp, go, java, " \
        "javascript, javascriptreact, python, rust, typescript, typescriptreact)" in unnamed.stderr, unnamed.stderr
    assert json.loads(unnamed.stdout)["region"] == "neutral"
    unknown = subprocess.run([*run, "--language", "COBOL", *map(str, flags)], input=source.read_text(),
                             capture_output=True, text=True, timeout=300)
    assert "warning: --language 'cobol': no grammar for it" in unknown.stderr, unknown.stderr
    assert "completing without its syntax" in unknown.stderr
    suffixed = nestling("complete", source, "--language", "cobol", *flags)  # the file's suffix, as the daemon takes it
    assert suffixed.returncode == 0 and "using its suffix's, python" in suffixed.stderr, suffixed.stderr
    assert json.loads(suffixed.stdout)["region"] == json.loads(named.stdout)["region"]
    upper = subprocess.run([*run, "--language", "Python", *map(str, flags)], input=source.read_text(),
                           capture_output=True, text=True, timeout=300)
    assert upper.returncode == 0 and json.loads(upper.stdout)["region"] == json.loads(named.stdout)["region"]
    (source.parent / "-").write_text(source.read_text())  # a file named "-", as ./- names it: not stdin
    dashed = subprocess.run([*run[:-1], "./-", "--language", "python", *map(str, flags)], input="",
                            capture_output=True, text=True, timeout=300, cwd=source.parent)
    assert dashed.returncode == 0 and json.loads(dashed.stdout)["text"] == json.loads(named.stdout)["text"], \
        dashed.stderr


def test_complete_refuses_an_empty_stop_string_as_the_daemon_does(source):
    result = nestling("complete", source, "--line", 5, "--col", 5, "--stop", "")
    assert result.returncode == 2 and "--stop takes a non-empty string" in result.stderr


def test_complete_refuses_max_tokens_past_the_models_positions(model_dir, source):
    result = nestling("complete", source, "--line", 5, "--col", 5, "--model", model_dir, "--head", "none",
                      "--max-tokens", 5000)  # (the tiny model has 4,096 positions; nothing checked them)
    assert result.returncode == 2 and "runs past the 4,096 positions of" in result.stderr, result.stderr
    assert "give --max-tokens" in result.stderr
