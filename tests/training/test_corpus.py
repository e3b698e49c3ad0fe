from nestling.daemon.training.corpus import MAX_FILE_BYTES, MIN_FILE_BYTES, Skipped, discover, split_held_out
from nestling.daemon.training.samples import cut_points


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def body(n):
    return "\n".join(f"def f{n}_{i}(x):\n    return x + {i}" for i in range(30))


def test_globs_pick_languages_and_skip_the_rest(tmp_path):
    write(tmp_path / "a" / "one.py", body(1))
    write(tmp_path / "a" / "two.go", body(2))
    write(tmp_path / "a" / "notes.txt", body(3))
    write(tmp_path / "a" / "tests" / "test_x.py", body(4))
    write(tmp_path / "b" / "three.py", body(5))
    files = discover([str(tmp_path / "a")])
    assert sorted(f.path.name for f in files) == ["one.py", "two.go"]
    assert {f.language for f in files} == {"python", "go"}
    only_py = discover([str(tmp_path / "**" / "*.py")])
    assert sorted(f.path.name for f in only_py) == ["one.py", "three.py"]
    excluded = discover([str(tmp_path)], exclude=[str(tmp_path / "b")])
    assert "three.py" not in {f.path.name for f in excluded}


def test_folders_above_the_corpus_do_not_count_as_test_suites_and_a_missing_path_is_an_error(tmp_path):
    import pytest

    project = tmp_path / "tests" / "project"  # a project kept under a folder named tests
    write(project / "one.py", body(1))
    write(project / "tests" / "test_one.py", body(2))  # its own test suite: skipped
    assert [f.path.name for f in discover([str(project)])] == ["one.py"]
    assert [f.path.name for f in discover([str(project / "*.py")])] == ["one.py"]
    with pytest.raises(ValueError, match=r"--corpus .*projetc: no such file or folder"):
        discover([str(project), str(tmp_path / "tests" / "projetc")])
    assert discover([str(tmp_path / "nothing" / "*.py")]) == []  # a glob may match nothing


def test_identical_files_are_kept_once(tmp_path):
    write(tmp_path / "x.py", body(1))
    write(tmp_path / "copy" / "x.py", body(1))
    write(tmp_path / "y.py", body(2))
    skipped = Skipped()
    assert len(discover([str(tmp_path)], skipped=skipped)) == 2
    assert skipped.as_dict() == {"duplicate": 1}  # (copies were not counted among the files left out)
    assert skipped.sentence() == "corpus: 1 source file left out (1 duplicate): no prompts are cut from it"


def test_files_left_out_for_their_size_or_encoding_are_counted_and_said(tmp_path):
    """(They were dropped in silence, and a file that is not UTF-8 was counted among the corpus's files.)"""
    write(tmp_path / "ok.py", body(1))
    write(tmp_path / "tiny.py", "x = 1\n")
    write(tmp_path / "generated.py", "x = 1\n" * (MAX_FILE_BYTES // 6 + 1))
    (tmp_path / "latin.py").write_bytes(body(2).encode() + b"\n# caf\xe9\n")
    write(tmp_path / "empty_init" / "__init__.py", "")
    skipped = Skipped()
    files = discover([str(tmp_path)], skipped=skipped)
    assert sorted((f.path.name, f.utf8) for f in files) == [("latin.py", False), ("ok.py", True)]
    assert skipped.as_dict() == {"small": 2, "large": 1, "not_utf8": 1}
    assert skipped.sentence() == (f"corpus: 4 source files left out (2 under {MIN_FILE_BYTES} bytes, 1 over "
                                  f"{MAX_FILE_BYTES // 1000} KB, 1 not UTF-8): no prompts are cut from them")
    assert Skipped().sentence() is None and Skipped().as_dict() == {}


def test_held_out_split_is_disjoint_and_stable(tmp_path):
    for i in range(300):
        write(tmp_path / f"m{i}.py", body(i))
    files = discover([str(tmp_path)])
    train, held = split_held_out(files, 0.1)
    assert held and train
    assert not {f.digest for f in train} & {f.digest for f in held}
    assert len(train) + len(held) == len(files)
    assert split_held_out(list(reversed(files)), 0.1)[1] == sorted(held, key=lambda f: -files.index(f))[::-1] or \
        {f.digest for f in split_held_out(list(reversed(files)), 0.1)[1]} == {f.digest for f in held}


def test_cut_points_are_line_starts_or_inside_lines():
    import random
    text = body(7)
    lines_start = {0} | {i + 1 for i, c in enumerate(text) if c == "\n"}
    for offset, kind in cut_points(text, 20, random.Random(0)):
        line_start = max(s for s in lines_start if s <= offset)
        line = text[line_start:].split("\n")[0]
        indent = len(line) - len(line.lstrip())
        if kind == "line_start":
            assert offset == line_start + indent
        else:
            assert line_start + indent < offset < line_start + len(line)


def test_the_default_corpus_takes_the_standard_library_without_the_packages_installed_inside_it(tmp_path,
                                                                                                 monkeypatch):
    import sysconfig
    from nestling.daemon.training.corpus import default_roots
    stdlib = tmp_path / "lib" / "python3.11"
    write(stdlib / "textwrap.py", body(1))
    write(stdlib / "json" / "decoder.py", body(2))
    write(stdlib / "site-packages" / "flask" / "app.py", body(3))
    write(stdlib / "dist-packages" / "six.py", body(4))
    paths = dict(sysconfig.get_paths(), stdlib=str(stdlib))
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: paths)
    monkeypatch.setenv("NESTLING_CACHE_DIR", str(tmp_path / "cache"))
    found = {f.path.relative_to(stdlib).as_posix() for f in discover(default_roots()) if stdlib in f.path.parents}
    assert found == {"textwrap.py", "json/decoder.py"}
