"""FIM training samples: where the cuts fall, and the function-body cuts shaped like HumanEval's prompts."""

import random

from char_tokenizer import FIM, CharTokenizer
from nestling.daemon.context.fim import FimBudget
from nestling.daemon.training.corpus import SourceFile
from nestling.daemon.training.samples import body_shortfall, function_bodies, make_samples

SOURCE = '''import os


def documented(path):
    """Return the path's size."""
    size = os.path.getsize(path)
    return size


def bare(x):
    return x + 1


class Box:
    async def fetch(self, key):
        """Fetch one key.

        Several lines of docstring.
        """
        return await self.store.get(key)

    def only_doc(self):
        """Nothing after the docstring."""


def last(a, b):
    \'\'\'Add.\'\'\'
    return a + b
'''


def source_file(tmp_path, name, text, language):
    path = tmp_path / name
    path.write_text(text)
    return SourceFile(path, language, name)


def test_function_bodies_start_after_the_docstring_and_end_after_the_function():
    bodies = function_bodies(SOURCE)
    assert [SOURCE[start:end] for start, end in bodies] == [
        "    size = os.path.getsize(path)\n    return size\n",
        "        return await self.store.get(key)\n",
        "    return a + b\n",
    ]  # bare() has no docstring, only_doc() nothing after it
    assert all(SOURCE[start - 4:start] in ('"""\n', "'''\n") for start, _ in bodies)  # column 0 after the docstring


def test_text_that_does_not_parse_has_no_function_bodies():
    assert function_bodies("def broken(:\n    '''doc'''\n    pass\n") == []
    assert function_bodies("") == []


def test_body_cuts_prompt_with_the_signature_and_docstring_and_resume_after_the_function(tmp_path):
    files = [source_file(tmp_path, "a.py", SOURCE, "python")]
    samples = make_samples(CharTokenizer(), FIM, files, per_file=3, budget=FimBudget(prefix_tokens=4000,
                                                                                      suffix_tokens=4000),
                           seed=1, body_fraction=1.0)
    assert [s.kind for s in samples] == ["function_body"] * 3
    bodies = function_bodies(SOURCE)
    for sample in samples:
        text = CharTokenizer().decode(sample.prompt_ids)
        prefix, suffix = text.removeprefix("<pre>").removesuffix("<mid>").split("<suf>")
        start, end = next((s, e) for s, e in bodies if SOURCE[:s] == prefix)
        assert suffix in (SOURCE[end:], "")  # what follows the function, or none (a function written at the file's end)


def test_without_a_body_fraction_no_cut_is_a_function_body_and_other_languages_never_get_one(tmp_path):
    files = [source_file(tmp_path, "a.py", SOURCE, "python"), source_file(tmp_path, "b.js", SOURCE, "javascript")]
    budget = FimBudget(prefix_tokens=4000, suffix_tokens=4000)
    plain = make_samples(CharTokenizer(), FIM, files, per_file=3, budget=budget, seed=2)
    assert {s.kind for s in plain} <= {"line_start", "mid_line"} and len(plain) == 6
    mixed = make_samples(CharTokenizer(), FIM, files, per_file=3, budget=budget, seed=2, body_fraction=1.0)
    kinds = {(s.source.endswith(".py"), s.kind) for s in mixed}
    assert (True, "function_body") in kinds and not any(kind == "function_body" for py, kind in kinds if not py)


def test_a_python_file_without_documented_functions_falls_back_to_ordinary_cuts(tmp_path):
    text = "\n".join(f"def f{i}(x):\n    return x * {i}\n" for i in range(20))
    files = [source_file(tmp_path, "plain.py", text, "python")]
    samples = make_samples(CharTokenizer(), FIM, files, per_file=3, budget=FimBudget(), seed=0, body_fraction=1.0)
    assert len(samples) == 3 and {s.kind for s in samples} <= {"line_start", "mid_line"}


def test_the_body_share_follows_body_fraction(tmp_path):
    text = "\n".join(f'def f{i}(x):\n    """Times {i}."""\n    return x * {i}\n' for i in range(40))
    files = [source_file(tmp_path, f"m{i}.py", text + f"\n# {i}\n", "python") for i in range(40)]
    samples = make_samples(CharTokenizer(), FIM, files, per_file=3, budget=FimBudget(), seed=0, body_fraction=0.5)
    share = sum(s.kind == "function_body" for s in samples) / len(samples)
    assert len(samples) == 120 and 0.35 < share < 0.65


def test_a_corpus_that_dilutes_the_body_share_is_reported_and_one_that_does_not_is_not(tmp_path):
    documented_text = "\n".join(f'def f{i}(x):\n    """Times {i}."""\n    return x * {i}\n' for i in range(40))
    python = [source_file(tmp_path, f"m{i}.py", documented_text + f"\n# {i}\n", "python") for i in range(10)]
    others = [source_file(tmp_path, f"m{i}.js", documented_text + f"\n// {i}\n", "javascript") for i in range(30)]
    for files, diluted in ((python, False), (python + others, True)):
        samples = make_samples(CharTokenizer(), FIM, files, per_file=3, budget=FimBudget(), seed=0, body_fraction=0.8)
        message = body_shortfall(samples, files, 0.8)
        bodies = sum(s.kind == "function_body" for s in samples)
        if diluted:
            assert message is not None and f"{bodies} of {len(samples)} training prompts" in message
            assert "10 of 40 training files are Python, 10 of those have a documented function" in message
            assert "a Python-only --corpus gives more" in message
        else:
            assert message is None and bodies / len(samples) > 0.4
    assert body_shortfall(make_samples(CharTokenizer(), FIM, others, per_file=3, budget=FimBudget()), others, 0) is None


def test_a_python_corpus_diluted_by_files_without_docstrings_is_told_so_not_to_go_python_only(tmp_path):
    documented_text = "\n".join(f'def f{i}(x):\n    """Times {i}."""\n    return x * {i}\n' for i in range(40))
    plain_text = "\n".join(f"def g{i}(x):\n    return x - {i}\n" for i in range(40))
    files = [source_file(tmp_path, f"d{i}.py", documented_text + f"\n# {i}\n", "python") for i in range(5)]
    files += [source_file(tmp_path, f"p{i}.py", plain_text + f"\n# {i}\n", "python") for i in range(35)]
    samples = make_samples(CharTokenizer(), FIM, files, per_file=3, budget=FimBudget(), seed=0, body_fraction=0.8)
    message = body_shortfall(samples, files, 0.8)
    assert message is not None and "40 of 40 training files are Python, 5 of those have a documented" in message
    assert "richer in documented Python functions" in message and "Python-only" not in message
