"""Where completions come from: the shared daemon over gRPC (started on demand), or an engine embedded in
this process (--embedded). LSP types stop at the handlers; these take and return plain values."""

from __future__ import annotations

import asyncio
import logging
import re
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Callable

import grpc

from ..daemon.code_stamp import stale_daemon_notice
from ..daemon.grpc_api.client import (LINE_MODE_CODES, AsyncClient, full_text_request, max_tokens_limit_of,
                                      prefill_request, target_for, user_daemon)
from ..daemon.service.config import config_path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Opened:
    """A document just opened, to prepare ahead of its first completion."""

    uri: str
    language_id: str
    text: str
    cursor: int  # where a completion is expected (the end of the text when the editor does not say)


@dataclass(frozen=True)
class Query:
    uri: str
    language_id: str
    text: str
    cursor: int  # code points before the cursor
    max_tokens: int
    line_mode: str  # auto | single | multi
    alternatives: int


class BackendError(Exception):
    """A completion failed for a reason the user should see (message is human readable)."""


class TokenError(BackendError):
    """The daemon wants a token (`nestling serve --token`) that this backend lacks or has wrong: every request fails."""


Progress = Callable[[str, str | None], None]  # (phase: begin|report|end, message)


CLIENT = f"nestling-lsp-{uuid.uuid4().hex[:12]}"  # this language server's name to the daemon: its requests supersede
# only its own (another editor may have the same file open, or its own "untitled:Untitled-1")
START_RETRY_S = 30.0  # after a failed start of the daemon, requests get its error for this long before another try


OLD_DAEMON_REFUSAL = re.compile(r"options\.max_tokens: must be 0\.\.(\d+)")  # a daemon started before its refusals
# carried the limit as metadata said it only in these words


def max_tokens_limit(exc: grpc.aio.AioRpcError) -> int | None:
    """The daemon's max_tokens_limit where `exc` refused a request for more tokens than it, else None."""
    if (limit := max_tokens_limit_of(exc)) is not None or exc.code() != grpc.StatusCode.INVALID_ARGUMENT:
        return limit
    found = OLD_DAEMON_REFUSAL.search(exc.details() or "")
    return int(found.group(1)) if found and int(found.group(1)) > 0 else None


class DaemonBackend:
    """Talks to the user's daemon; starts it when none answers, and reconnects if it restarts."""

    def __init__(self, socket: str | None, tcp: str | None, token: str | None, auto_start: bool, serve_args=()):
        self.config_problem = None  # the config file cannot be read: every request says so (as `nestling serve` would)
        try:  # the editor's settings, else the config file's socket and token (those `nestling serve` uses)
            self.target, self.token = user_daemon(socket, tcp, token)
        except ValueError as exc:
            self.config_problem = str(exc)
            self.target, self.token = target_for(socket, tcp), token
        self.auto_start = auto_start and tcp is None
        self.socket = socket
        self.serve_args = list(serve_args)  # extra `nestling serve` flags for an auto-started daemon
        self.client = AsyncClient(self.target, self.token)  # (the token found: the editor's, $NESTLING_TOKEN's or the file's)
        self._starting: asyncio.Task | None = None
        self._start_failed: tuple[float, BackendError] | None = None  # when the last start failed, and how
        self.max_tokens_limit: int | None = None  # the daemon's, as its last refusal of a request above it said

    async def close(self) -> None:
        await self.client.close()

    async def ensure_ready(self, progress: Progress | None = None, wait_s: float = 900.0) -> None:
        if self.config_problem:
            raise BackendError(self.config_problem)
        state = await self.client.health_state(timeout=1.0)
        if state == "serving":
            return
        if state == "absent" and not self.auto_start:
            raise BackendError(f"no nestling daemon at {self.target}; start one with `nestling serve --detach`")
        if self._starting is not None and not self._starting.done():  # a start (or restart) is under way: wait for it
            await asyncio.shield(self._starting)
            return
        if state == "absent" and self._start_failed and time.monotonic() - self._start_failed[0] < START_RETRY_S:
            raise self._start_failed[1]  # (each try costs seconds of CPU: a broken setting fails them all alike)
        work = self._start(progress, wait_s) if state == "absent" else self._await_load(progress, wait_s)
        self._starting = asyncio.ensure_future(work)  # one start (or wait) for every request that asks
        await asyncio.shield(self._starting)

    async def _await_load(self, progress: Progress | None, wait_s: float) -> None:
        """A daemon answers but does not serve yet (it is loading its model: another client started it): wait."""
        if progress:
            progress("begin", "the nestling daemon is loading the model")
        state = await self.client.wait_serving(wait_s)
        if progress:
            progress("end", "nestling daemon ready" if state == "serving" else "nestling daemon not ready")
        if state != "serving":
            raise BackendError(f"the nestling daemon at {self.target} did not start serving "
                               f"({'it stopped' if state == 'absent' else f'still loading after {wait_s:.0f} s'})")

    async def _start(self, progress: Progress | None, wait_s: float) -> None:
        try:
            await self._serve("--detach", progress, wait_s, "starting the nestling daemon and loading the model",
                              "start")
        except BackendError as exc:
            self._start_failed = (time.monotonic(), exc)
            raise
        self._start_failed = None

    async def restart(self, progress: Progress | None = None, wait_s: float = 900.0) -> None:
        """`nestling serve --restart`: the running daemon makes way for one that runs the code installed now. Requests
        meanwhile wait for it as for a start (they had seen no daemon and started another beside it)."""
        if self._starting is not None and not self._starting.done():
            try:
                await asyncio.shield(self._starting)
            except BackendError:
                pass  # (the restart below is a new try)
        self._start_failed = None
        self._starting = asyncio.ensure_future(
            self._serve("--restart", progress, wait_s, "restarting the nestling daemon", "restart"))
        await asyncio.shield(self._starting)

    async def _serve(self, flag: str, progress: Progress | None, wait_s: float, begin: str, verb: str) -> None:
        """`nestling serve FLAG` (--detach or --restart) with this backend's socket and flags, reporting progress
        until it returns, then waits for this channel to reach the daemon."""
        if progress:
            progress("begin", begin)
        argv = [sys.executable, "-m", "nestling.daemon.cli.main", "serve", flag, "--wait", str(wait_s)]
        if self.socket:
            argv += ["--socket", self.socket]
        argv += self.serve_args
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(*argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                       stdin=subprocess.DEVNULL)
        while True:
            try:
                await asyncio.wait_for(asyncio.shield(process.wait()), timeout=2.0)
                break
            except asyncio.TimeoutError:
                if progress:
                    progress("report", f"loading the model ({time.monotonic() - started:.0f} s)")
        out, err = await process.communicate()
        started_ok = process.returncode == 0 or (flag == "--detach" and b"already running" in err)
        # wait for this channel to connect too (between reconnection attempts a call fails at once), and for a daemon
        # another client started to finish loading ("already running")
        ok = started_ok and await self.client.wait_serving(wait_s) == "serving"
        if progress:
            progress("end", "nestling daemon ready" if ok else f"nestling daemon failed to {verb}")
        if not ok:
            reason = err.decode(errors="replace").strip()[-500:] if not started_ok else self._not_answering()
            raise BackendError(f"could not {verb} the nestling daemon: {reason}")

    def _not_answering(self) -> str:
        """Why a daemon that runs does not answer this backend: it listens elsewhere (`serve --socket`), or not yet."""
        from ..daemon.grpc_api.addresses import locked_socket, lost_socket

        named = locked_socket()
        if named and f"unix:{named}" != self.target:
            return (f"a nestling daemon runs, but listens on {named}, not on {self.target}: set the language server's "
                    f"nestling.daemon.socket to it, or restart it (`nestling serve --restart`)")
        if gone := lost_socket(self.target):
            return (f"a nestling daemon runs, but its socket {gone} is gone (removed while it ran?): "
                    f"`nestling serve --restart` replaces it")
        return f"it started but does not answer at {self.target}"

    @property
    def can_restart(self) -> bool:
        """Whether this backend may restart the daemon: the user's own, which it starts on demand."""
        return self.auto_start

    async def stale_notice(self) -> str | None:
        """What to tell the user when the daemon runs other code than this process (started before an upgrade):
        None when it runs the same, or cannot say."""
        try:
            stats = await self.client.stats()
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNAUTHENTICATED:  # health answers without the token; stats does not
                raise self._problem(exc) from None
            log.info("no stats from the daemon: %s", exc)
            return None
        return stale_daemon_notice(stats.code_stamp)

    def _problem(self, exc: grpc.aio.AioRpcError) -> BackendError:
        """What a failed call tells the user."""
        if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
            which = "and none is set" if not self.token else "and refused the one set"
            return TokenError(f"the nestling daemon at {self.target} wants a token (it runs with --token) {which}: put "
                              f"the daemon's token in the language server setting nestling.daemon.token (or as "
                              f"`token` in {config_path()}, which `nestling serve` reads too)")
        return BackendError(f"{exc.code().name}: {exc.details()}")

    async def complete(self, query: Query, progress: Progress | None = None) -> list[str]:
        request = full_text_request(query.uri, query.text, query.cursor, query.language_id, client=CLIENT,
                                    max_tokens=query.max_tokens, line_mode=LINE_MODE_CODES[query.line_mode],
                                    alternatives=query.alternatives)
        waited = clamped = False
        for _ in range(3):
            try:
                answer = await self.client.complete(request, timeout=120)
                return [item.text for item in answer.items]
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.UNAVAILABLE and not waited:
                    await self.ensure_ready(progress)  # the daemon restarted or is loading: wait, then retry once
                    waited = True
                    continue
                if not clamped and (limit := max_tokens_limit(exc)) is not None:
                    # a limit under the editor's maxTokens refused every completion: ask again for the limit (each
                    # time: a refusal costs a round trip, and a daemon restarted with another limit is followed)
                    if limit != self.max_tokens_limit:
                        log.info("the daemon takes at most %d tokens a completion (its max_tokens_limit): asking for "
                                 "that many, not maxTokens %d", limit, query.max_tokens)
                    self.max_tokens_limit, clamped = limit, True
                    request.options.max_tokens = limit
                    continue
                if exc.code() == grpc.StatusCode.CANCELLED:
                    return []  # superseded by a newer request for the same document
                raise self._problem(exc) from None
        return []

    async def prefill(self, opened: Opened) -> None:
        """Best effort, once the daemon is up (starting it is ensure_ready's): the daemon prepares the document; a
        failure only costs time at the first completion."""
        try:
            reply = await self.client.prefill(prefill_request(opened.uri, opened.text, opened.cursor,
                                                              opened.language_id, CLIENT), timeout=120)
        except grpc.aio.AioRpcError as exc:
            log.info("no prefill for %s: %s", opened.uri, exc)
            return
        log.info("prefilled %s: %d prompt tokens computed in %.0f ms%s", opened.uri, reply.prefilled_tokens,
                 reply.total_ms, "" if reply.complete else " (interrupted)")


class EmbeddedBackend:
    """The engine in this process (for a quick try or tests): the same service and worker the daemon runs."""

    def __init__(self, load_runtime, config=None):
        self._load_runtime = load_runtime
        self._config = config
        self.worker = None
        self.service = None
        self._loading: asyncio.Task | None = None

    async def close(self) -> None:
        await asyncio.to_thread(self.stop)

    def stop(self) -> None:
        """Stop the engine's worker (its thread ends after the job it runs)."""
        if self.worker is not None:
            self.worker.stop()

    async def ensure_ready(self, progress: Progress | None = None) -> None:
        if self.worker is not None:
            return
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._load(progress))
        await asyncio.shield(self._loading)

    can_restart = False  # no daemon: the engine runs in this process

    async def stale_notice(self) -> str | None:
        return None  # the engine runs in this process: its code is this process's

    async def _load(self, progress: Progress | None) -> None:
        from ..daemon.service.completion import CompletionService
        from ..daemon.service.config import ServiceConfig
        from ..daemon.service.stats import ServiceStats
        from ..daemon.service.worker import ModelWorker

        from ..daemon.models.errors import ModelLoadError

        if progress:
            progress("begin", "loading the model")
        try:
            runtime = await asyncio.to_thread(self._load_runtime)
            if progress:
                progress("report", "measuring the verification cost (once per model and device)")
            await asyncio.to_thread(lambda: runtime.profile)  # as the daemon does: not on the first keystroke
        except (ModelLoadError, ValueError, OSError, BackendError) as exc:  # kept: every later request says the same
            if progress:
                progress("end", "the model failed to load")
            raise (exc if isinstance(exc, BackendError) else BackendError(f"the model could not be loaded: {exc}")) \
                from None
        self.service = CompletionService(runtime, self._config or ServiceConfig())
        self.worker = ModelWorker(self.service, ServiceStats())
        if progress:
            progress("end", "model loaded")

    async def complete(self, query: Query, progress: Progress | None = None) -> list[str]:
        from ..daemon.service.completion import CompletionRequest, Superseded

        await self.ensure_ready(progress)
        request = CompletionRequest(uri=query.uri, language_id=query.language_id, text=query.text, cursor=query.cursor,
                                    max_tokens=min(query.max_tokens, self.service.config.max_tokens_limit),
                                    line_mode=query.line_mode, alternatives=query.alternatives)
        try:
            self.service.validate(request)
        except ValueError as exc:
            raise BackendError(str(exc)) from None
        job = self.worker.submit(request)
        try:
            result = await asyncio.wrap_future(job.future)
        except asyncio.CancelledError:
            self.worker.cancel(job)
            raise
        except Superseded:
            return []
        except Exception as exc:
            raise BackendError(f"completion failed: {exc}") from None
        return [item.text for item in result.items]

    async def prefill(self, opened: Opened) -> None:
        from ..daemon.service.completion import PrefillRequest

        if self.worker is None:
            return  # not loaded (loading is ensure_ready's)
        request = PrefillRequest(uri=opened.uri, language_id=opened.language_id, text=opened.text,
                                 cursor=opened.cursor)
        try:
            self.service.validate(request)
            await asyncio.wrap_future(self.worker.submit(request).future)
        except Exception as exc:  # best effort, as for the daemon (Superseded included)
            log.info("no prefill for %s: %s", opened.uri, exc)
