"""The language table (grammars/languages.toml): LSP languageIds and file suffixes -> grammar and region queries."""

from __future__ import annotations

import importlib
import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import PurePath
from urllib.parse import unquote, urlsplit

UNSAFE_IN_NAME = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]|<\|")  # in a file name, no hint: it would write the prompt


@dataclass(frozen=True)
class LanguageSpec:
    name: str  # table key, e.g. "python"
    language_ids: tuple[str, ...]  # LSP languageIds
    extensions: tuple[str, ...]  # file suffixes
    module: str  # grammar package
    function: str  # its function returning the language pointer
    queries: str  # folder of regions.scm
    line_tails: tuple[str, ...] = ()  # what may end a line that does not parse yet, after a name (languages.toml)


@lru_cache(maxsize=1)
def language_table() -> dict[str, LanguageSpec]:
    data = tomllib.loads(resources.files("nestling.grammars").joinpath("languages.toml").read_text())
    return {name: LanguageSpec(name, tuple(row["language_ids"]), tuple(row["extensions"]), row["module"],
                               row["function"], row["queries"], tuple(row.get("line_tails", ())))
            for name, row in data.items()}


def find_language(language_id: str | None = None, path: str | None = None) -> LanguageSpec | None:
    """The table row for an LSP languageId or, failing that, a file path's suffix; None when unknown."""
    table = language_table().values()
    if language_id:  # (LSP's ids are lower case; "Python" from a script means it too)
        wanted = language_id.lower()
        for spec in table:
            if wanted in spec.language_ids or wanted == spec.name:
                return spec
    if path:
        suffix = PurePath(path).suffix.lower()
        for spec in table:
            if suffix in spec.extensions:
                return spec
    return None


def file_name_hint(name: str | None, language_id: str | None = None) -> str | None:
    """The document's file name as the model's hint of its language (`main.go`): `name` where it has a suffix and the
    languageId names no other language, else `untitled` with the first suffix of the language the languageId names
    (an editor's new buffer; a notebook's cell, `nb.ipynb`: `untitled.py`), else None. A name with a control character
    or a `<|` (text the prompt would take for its own) is no hint."""
    spec = find_language(language_id) if language_id else None
    if name and PurePath(name).suffix and not UNSAFE_IN_NAME.search(name) and (
            spec is None or PurePath(name).suffix.lower() in spec.extensions):
        return name
    return f"untitled{spec.extensions[0]}" if spec else None


def uri_file_name(uri: str) -> str:
    """The last part of a URI's path (`file:///src/my%20app/main.rs`: `main.rs`), or of a plain path."""
    return unquote(urlsplit(uri).path).replace("\\", "/").rsplit("/", 1)[-1]


@lru_cache(maxsize=None)
def load_grammar(spec: LanguageSpec):
    """(tree_sitter.Language, regions Query) for a table row; raises ImportError if the grammar is missing."""
    from tree_sitter import Language, Query

    module = importlib.import_module(spec.module)
    language = Language(getattr(module, spec.function)())
    source = resources.files("nestling.grammars").joinpath(spec.queries, "regions.scm").read_text()
    return language, Query(language, source)
