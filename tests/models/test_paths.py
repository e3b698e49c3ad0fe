"""Per-user file locations and replacing a file in one step (daemon/models/paths.py)."""

import pytest

from nestling.daemon.models.paths import replacing


def test_a_file_is_replaced_whole_or_not_at_all(tmp_path):
    path = tmp_path / "checkpoint.pt"
    path.write_text("the last good one")
    with pytest.raises(OSError):
        with replacing(path) as temporary:
            temporary.write_text("half of the new o")
            raise OSError("No space left on device")
    assert path.read_text() == "the last good one" and list(tmp_path.iterdir()) == [path]
    with replacing(path) as temporary:
        temporary.write_text("the new one")
    assert path.read_text() == "the new one" and list(tmp_path.iterdir()) == [path]
