"""Where nestling keeps its per-user files (caches, config, runtime sockets)."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path


def xdg_folder(variable: str) -> str | None:
    """$`variable` (XDG_RUNTIME_DIR, XDG_CONFIG_HOME, XDG_CACHE_HOME) where it is an absolute path; None where it is
    unset, empty or relative, which the XDG spec says to ignore (QA: XDG_RUNTIME_DIR=rt gave a daemon per working
    folder, each finding none of the others)."""
    value = os.environ.get(variable)
    return value if value and os.path.isabs(value) else None


def cache_dir() -> Path:
    """The user cache dir: $NESTLING_CACHE_DIR, else $XDG_CACHE_HOME/nestling, else ~/.cache/nestling (created when
    first written). The row-invariance verdict does without it (checked again at the next load) when it cannot be
    written; the converted model and the cost profile use checked_cache_dir."""
    return _cache_dir_and_source()[0]


def checked_cache_dir() -> Path:
    """cache_dir(), for the files nestling keeps there by all means (the converted model, the cost profile): a
    NotADirectoryError naming the variable that set it when the path is a file, or lies under one."""
    path, named, value = _cache_dir_and_source()
    if named:
        _check_folder(path, named, value)
    return path


def _cache_dir_and_source() -> tuple[Path, str | None, str | None]:
    if env := os.environ.get("NESTLING_CACHE_DIR"):
        return Path(env), "$NESTLING_CACHE_DIR", env
    if env := xdg_folder("XDG_CACHE_HOME"):
        return Path(env) / "nestling", "$XDG_CACHE_HOME", env
    return Path.home() / ".cache" / "nestling", None, None


def _check_folder(path: Path, named: str, value: str) -> None:
    """NotADirectoryError when `path`, or the nearest part of it that exists, is not a folder."""
    for part in (path, *path.parents):
        try:
            if not part.exists():
                continue
        except OSError:  # (a folder above it not searchable: the write that follows says so)
            return
        if not part.is_dir():
            raise NotADirectoryError(f"{named} is {value!r}, but {part} is a file, not a folder: set {named} to a "
                                     "folder (it is created if missing), or unset it for the default location")
        return


def _file_mode() -> int:
    umask = os.umask(0o022)  # (read by setting it; put back at once)
    os.umask(umask)
    return 0o666 & ~umask


FILE_MODE = _file_mode()  # what a file written here gets: what the user's umask gives a new file


@contextmanager
def replacing(path: Path):
    """Yields a temporary path beside `path` to write; when the block ends without an error it takes `path`'s place
    in one rename, so a crash or a full disk while writing leaves the old file whole."""
    path = Path(path)
    temporary = path.with_name(path.name + ".tmp")
    try:
        yield temporary
        os.chmod(temporary, FILE_MODE)  # (safetensors writes 0600 whatever the umask: a head another account's daemon
        os.replace(temporary, path)  # could not read)
    finally:
        temporary.unlink(missing_ok=True)

