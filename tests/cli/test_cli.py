"""The CLI as a user runs it (a subprocess), on a tiny random model folder."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nestling.daemon.models.eagle_head import save_head
from nestling.daemon.service.completion import predicted_keystroke
from tiny import save_tiny_model_folder, tiny_head


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


def nestling(*args):
    return subprocess.run([sys.executable, "-m", "nestling.daemon.cli.main", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_complete_json_is_one_object_with_text_and_stats(model_dir, head_dir, source):
    spec = nestling("complete", source, "--line", 5, "--col", 5, "--model", model_dir, "--head", head_dir,
                    "--dtype", "float32", "--max-tokens", 12, "--json")
    ar = nestling("complete", source, "--line", 5, "--col", 5, "--model", model_dir, "--head", head_dir,
                  "--dtype", "float32", "--max-tokens", 12, "--json", "--mode", "ar")
    assert spec.returncode == 0, spec.stderr
    assert ar.returncode == 0, ar.stderr
    spec_out, ar_out = json.loads(spec.stdout), json.loads(ar.stdout)
    assert spec_out["text"] == ar_out["text"] and spec_out["stats"]["new_tokens"] == ar_out["stats"]["new_tokens"] > 0
    assert {"tau", "new_tokens", "total_ms", "prefill_ms", "draft_ms", "verify_ms"} <= set(spec_out["stats"])
    assert ar_out["stats"]["tau"] == 1.0


def test_complete_plain_prints_text_then_stats_on_stderr(model_dir, source):
    flags = ("complete", source, "--line", 1, "--col", 1, "--model", model_dir, "--head", "none", "--max-tokens", 5)
    result, as_json = nestling(*flags), nestling(*flags, "--json")
    assert result.returncode == 0, result.stderr
    assert result.stdout == json.loads(as_json.stdout)["text"] + "\n"  # the completion alone on stdout
    assert "tokens, mode spec" in result.stderr


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
                                           (["--device", "bogus"], "'bogus' is not a device name")])
def test_bad_sampling_and_device_flags_are_clear_errors(model_dir, source, flags, message):
    result = nestling("complete", source, "--line", 1, "--col", 1, "--model", model_dir, *flags)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_bad_model_and_head_paths_are_clear_errors(tmp_path, model_dir, source):
    result = nestling("complete", source, "--line", 1, "--col", 1, "--model", tmp_path / "nope")
    assert result.returncode == 2 and "no such file or folder" in result.stderr
    result = nestling("complete", source, "--line", 1, "--col", 1, "--model", model_dir, "--head", tmp_path / "nohead")
    assert result.returncode == 2 and "no such head folder" in result.stderr


def test_bench_compares_modes_side_by_side(model_dir, head_dir, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("\n".join(f"def f{i}(x):\n    return x * {i} + {i}" for i in range(12)))
    out = tmp_path / "bench.json"
    result = nestling("bench", src, "--model", model_dir, "--head", head_dir, "--dtype", "float32",
                      "--per-file", 3, "--max-tokens", 10, "--depth", 3, "--top-k", 3, "--total-tokens", 8,
                      "--peers", "--out", out)
    assert result.returncode == 0, result.stderr
    assert "identical" in result.stdout
    report = json.loads(out.read_text())
    modes = {m["mode"]: m for m in report["modes"]}
    assert set(modes) == {"ar", "spec", "hf-greedy", "hf-lookup"}
    for mode in ("spec", "hf-greedy", "hf-lookup"):
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
                      "--per-file", 3, "--max-tokens", 10, "--shape-variants", variants, "--out", out)
    assert result.returncode == 0, result.stderr
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


def test_bench_type_through_types_the_shown_completion_with_and_without_the_hint(tmp_path):
    model, src = typing_sources(tmp_path)
    out = tmp_path / "typing.json"
    # no draft gate: it decides from timings, and a loaded machine could make it draft less in one setting
    result = nestling("bench", src, "--target", "type-through", "--model", model, "--head", "untrained",
                      "--dtype", "float32", "--per-file", 2, "--keystrokes", 3, "--max-tokens", 12, "--out", out,
                      "--no-draft-gate")
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
    result = nestling("bench", src, "--target", "type-through", "--model", model, "--pause-ms", -1)
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
    assert lines[2].startswith("exact     " + says)
    assert ("packed weights" in lines[1]) == bool(fields.get("packed_weights"))


def test_stats_carry_the_runtime_exactness_and_packing():
    from nestling.daemon.grpc_api.convert import stats_response

    snapshot = {"uptime_s": 1.0, "requests": 0, "errors": 0, "superseded": 0, "mean_tau": 0.0, "prefills": 0,
                "prefilled_tokens": 0, "prefills_ahead": 0, "prefills_ahead_used": 0,
                **{key: {"p50": 0.0, "p95": 0.0, "p99": 0.0} for key in ("first_token", "total")}}
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
    assert "--max-steps MAX_STEPS optimizer steps at most (cosine decay to 10% over these) (default: 2000)" in text
    assert "--eval-steps EVAL_STEPS draft steps scored at each held-out evaluation" in text and "(default: 6)" in text
    assert "--corpus PATH folders/globs; empty = the default corpus (repeatable)" in text


def test_bench_checks_its_outputs_sources_and_counts_before_it_runs(tmp_path):
    result = nestling("bench", "--out", tmp_path / "missing" / "report.json")
    assert result.returncode == 2 and "the folder" in result.stderr and "does not exist" in result.stderr
    result = nestling("bench", "--target", "open", tmp_path / "typo.py")
    assert result.returncode == 2 and "--target open takes source files; not files:" in result.stderr
    for flag in ("--limit", "--keystrokes"):
        result = nestling("bench", flag, 0)
        assert result.returncode == 2 and f"{flag} must be at least 1" in result.stderr
    for flags, message in ((("--temperature", 0.5, "--peers"), "decode greedily only"),
                           (("--top-p", 0), "--top-p must be in (0, 1]"), (("--seed", -1), "--seed must be in"),
                           (("--target", "syntax", "--seed", 3), "apply to the decoding modes, not --target syntax")):
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
