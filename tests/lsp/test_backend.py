"""The embedded backend (the engine in the language server's process): completions and the prefill on opening."""

import asyncio

from conftest import MODEL
from nestling.daemon.models.target import load_target
from nestling.daemon.runtime import Runtime
from nestling.daemon.speculative.drafter import TreeBudget
from nestling.lsp.backend import BackendError, EmbeddedBackend, Opened, Query
from tiny import informed_head

TEXT = "import os\n\n\ndef main(path):\n    names = os.listdir(path)\n    return names\n" * 8


def tiny_runtime():
    target = load_target(str(MODEL), device="cpu", dtype="float32", progress=False)
    return Runtime(target=target, head=informed_head(target), head_source="test", budget=TreeBudget(4, 4, 12))


def test_a_prefilled_document_is_completed_from_its_prepared_prompt():
    async def scenario():
        backend = EmbeddedBackend(tiny_runtime)
        await backend.prefill(Opened("file:///early.py", "python", TEXT, len(TEXT)))  # not loaded yet: skipped
        await backend.ensure_ready()
        await backend.prefill(Opened("file:///a.py", "python", TEXT, len(TEXT)))
        session = backend.service.sessions.get("file:///a.py")
        prepared = len(session.states["spec"].tokens)
        cursor = TEXT.index("return names", len(TEXT) // 2)
        texts = await backend.complete(Query("file:///a.py", "python", TEXT, cursor, 8, "single", 1))
        result = backend.worker.stats.snapshot()
        await backend.close()
        return prepared, texts, result

    prepared, texts, stats = asyncio.run(scenario())
    assert prepared > 100 and stats["prefills"] == 1 and stats["prefilled_tokens"] == prepared
    assert stats["requests"] == 1 and texts


def test_a_model_that_fails_to_load_is_a_backend_error_each_time_and_the_progress_ends(tmp_path):
    def missing_model():
        return load_target(str(tmp_path / "no-model"), device="cpu", progress=False)

    async def scenario():
        backend, reports = EmbeddedBackend(missing_model), []
        errors = []
        for _ in range(2):  # the warm-up, then a completion request
            try:
                await backend.complete(Query("file:///a.py", "python", TEXT, 10, 8, "single", 1),
                                       lambda kind, message: reports.append((kind, message)))
            except BackendError as exc:
                errors.append(str(exc))
        return reports, errors

    reports, errors = asyncio.run(scenario())
    assert len(errors) == 2 and all(e.startswith("the model could not be loaded: ") and "no-model" in e for e in errors)
    assert reports == [("begin", "loading the model"), ("end", "the model failed to load")]
