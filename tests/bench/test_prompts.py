"""Benchmark prompts from JSONL files: a line that is not a prompt is named by file and line."""

import pytest

from nestling.daemon.bench.prompts import collect, interleaved, load_jsonl


@pytest.mark.parametrize("line,message", [("[1, 2]", "expected a JSON object, not list"),
                                          ('{"prefix": "x", "suffix": null}', "'suffix' must be a string"),
                                          ('{"suffix": "x"}', "needs a string 'prefix'"),
                                          ('{"prefix": "x", "path": 5}', "'path' must be a string, not 5"),
                                          ("{not json", "not JSON")])
def test_a_line_that_is_no_prompt_is_named(tmp_path, line, message):
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prefix": "def f(", "suffix": ")"}\n' + line + "\n")
    with pytest.raises(ValueError, match=f"prompts.jsonl:2: {message}"):
        load_jsonl(path)


def test_prompts_are_read_and_limited(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(f'{{"prefix": "x = {i}", "id": "p{i}"}}\n' for i in range(5)))
    prompts = collect([path], per_file=1, limit=2)
    assert [p.id for p in prompts] == ["p0", "p1"] and prompts[0].suffix == ""


def test_a_prompt_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_bytes(b'{"prefix": "caf\xe9"}\n')
    with pytest.raises(ValueError, match="prompts.jsonl: not UTF-8 text"):
        load_jsonl(path)


def test_a_limit_takes_positions_from_every_file_in_turn(tmp_path):
    """(QA: `--limit 4` took the four positions of the first file, alphabetically: a quick run was one Java file.)"""
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text("".join(f"value_{i} = compute_something({i}, {i + 1})\n" for i in range(40)))
    taken = collect([tmp_path], per_file=3, limit=4)
    assert [p.id.split(":")[0] for p in taken] == ["a.py", "b.py", "c.py", "a.py"]
    assert [p.kind for p in taken] == ["line_start", "mid_line", "line_start", "mid_line"]  # (review: all line starts)
    whole = collect([tmp_path], per_file=3, limit=None)  # no cut: file by file, as before
    assert [p.id.split(":")[0] for p in whole] == ["a.py"] * 3 + ["b.py"] * 3 + ["c.py"] * 3
    assert sorted(p.id for p in collect([tmp_path], per_file=3, limit=9)) == sorted(p.id for p in whole)
    assert interleaved([[1, 2], [3, 4], [5], []]) == [1, 4, 5, 2, 3]


def test_an_empty_prompt_file_says_what_a_prompt_file_holds(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match=r"no benchmark prompts found in .*empty.jsonl \(a .jsonl holds one prompt a "
                                         r"line\)"):
        collect([tmp_path / "empty.jsonl"], per_file=1, limit=None)


def test_files_of_one_name_in_two_folders_get_ids_apart_and_a_file_named_twice_is_benched_once(tmp_path):
    """(QA: `d1/util.py` and `d2/util.py` gave the same prompt ids, and a file given twice was benched twice.)"""
    for folder in ("d1", "d2"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "util.py").write_text("".join(f"{folder}_{i} = compute({i}, {i + 1})\n" for i in range(40)))
    prompts = collect([tmp_path / "d1", tmp_path / "d2", tmp_path / "d1" / "util.py"], per_file=1, limit=None)
    assert [p.id.split(":")[0] for p in prompts] == ["d1/util.py", "d2/util.py"]
    assert {p.path for p in prompts} == {"util.py"}  # (the name the prompt shows the model is the file's)
    single = collect([tmp_path / "d1"], per_file=2, limit=None)
    assert {p.id.split(":")[0] for p in single} == {"util.py"}
    (tmp_path / "d1" / "deep").mkdir()  # no clash: the file name alone, however deep (review: a folder prefix)
    (tmp_path / "d1" / "deep" / "other.py").write_text((tmp_path / "d1" / "util.py").read_text().replace("d1", "o"))
    assert {p.id.split(":")[0] for p in collect([tmp_path / "d1"], per_file=1, limit=None)} == {"util.py", "other.py"}
    from nestling.daemon.cli.bench import DEFAULT_PROMPTS

    assert not any("/" in p.id for p in collect([DEFAULT_PROMPTS], per_file=2, limit=None))  # (ids as recorded)
