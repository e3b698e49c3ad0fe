"""A real daemon (the gRPC server with its model worker) on a Unix socket, over a tiny random model."""

import pytest

from daemons import start_daemon, stop_daemon
from tiny import save_tiny_model_folder


@pytest.fixture(scope="session")
def model_folder(tmp_path_factory):
    return save_tiny_model_folder(tmp_path_factory.mktemp("tiny") / "model", never_stop=True, whole_characters=True)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, model_folder, monkeypatch_module):
    monkeypatch_module.setenv("XDG_RUNTIME_DIR", str(tmp_path_factory.mktemp("xdg")))
    # fixed prefill chunks: chunks paced in time follow the tiny model's (deliberately slowed, noisy) timings, so a
    # test that a request stops a prefill "within a chunk" would depend on the machine (paced: tests/service)
    running = start_daemon(tmp_path_factory.mktemp("d"), model_folder, prefill_chunk_tokens=128)
    yield running
    stop_daemon(running)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch
