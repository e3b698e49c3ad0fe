"""The daemon process: one per user (a lock), a Unix socket with owner-only permissions (TCP on loopback on
request), health and reflection services, the model loaded off the event loop, and graceful shutdown
(no new calls, in-flight ones get up to 10 s, then exit)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from ...proto import completion_pb2 as pb
from ...proto import completion_pb2_grpc as pb_grpc
from ..code_stamp import code_stamp as current_code_stamp
from ..log_levels import NOTICE
from ..service.completion import CompletionService
from ..service.config import ServiceConfig
from ..service.stats import ServiceStats
from ..service.worker import ModelWorker
from .addresses import check_tcp_address, take_lock, tcp_listen_problem
from .daemon_lock import DaemonError, DaemonLock  # noqa: F401  (DaemonError: what serve() raises)
from .errors import ErrorInterceptor
from .servicer import CompletionServicer

log = logging.getLogger(__name__)
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Completion"].full_name
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


@dataclass
class Daemon:
    """What the handlers share. `worker`, `service` and `runtime` stay None until the model has loaded."""

    config: ServiceConfig
    stats: ServiceStats = field(default_factory=ServiceStats)
    runtime: object | None = None
    service: CompletionService | None = None
    worker: ModelWorker | None = None
    code_stamp: str = field(default_factory=current_code_stamp)  # the code it started with (its files may change)
    stopping: threading.Event = field(default_factory=threading.Event)  # set at shutdown: a load still going ends unused


def _answers(socket_path: Path) -> bool:
    """Whether something accepts connections on the Unix socket `socket_path`."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(socket_path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino


async def serve(config: ServiceConfig, load_runtime, on_ready=None, stop: asyncio.Event | None = None,
                lock: DaemonLock | None = None) -> bool:
    """Run the daemon until SIGTERM/SIGINT (or `stop` is set). `load_runtime()` builds the engine, off the
    event loop; `on_ready(daemon)` is called once it serves. Returns whether it stopped before the model had loaded:
    the load then goes on in a daemon thread that nothing waits for (a process should exit without joining it).
    `lock`: this user's daemon lock, taken already (take_lock); else serve takes it."""
    socket_path = config.socket_path
    lock = lock or take_lock(socket_path)
    tcp = check_tcp_address(config.tcp, config.allow_remote, config.token) if config.tcp else None
    daemon = Daemon(config)
    server = grpc.aio.server(interceptors=[ErrorInterceptor(config.token)], options=[
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES), ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.so_reuseport", 0)])  # (gRPC's default: a second listener of this user shares the port unnoticed)
    pb_grpc.add_CompletionServicer_to_server(CompletionServicer(daemon), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection((SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    ours = None  # our socket file's (device, inode), once bound: only that one is removed at the end
    try:
        if socket_path.is_socket():
            if _answers(socket_path):  # a daemon of another runtime folder (its own lock), or another program
                raise DaemonError(f"something already listens on {socket_path} (a nestling daemon started with "
                                  f"another XDG_RUNTIME_DIR?); nestling will not take its socket")
            socket_path.unlink()  # a stale socket: nobody answers on it
        old_umask = os.umask(0o177)
        try:
            _listen(server, f"unix:{socket_path}", f"--socket {str(socket_path)!r}")
        finally:
            os.umask(old_umask)
        ours = _identity(socket_path)
        if tcp:
            if (problem := tcp_listen_problem(*tcp)) is not None:  # (the OS's words, and no gRPC log line before them)
                raise DaemonError(f"--tcp {config.tcp!r}: cannot listen there: {problem}")
            _listen(server, f"{tcp[0]}:{tcp[1]}" if ":" not in tcp[0] else f"[{tcp[0]}]:{tcp[1]}",
                    f"--tcp {config.tcp!r}")
        await server.start()
        os.chmod(socket_path, 0o600)
        lock.mark_listening()
        for name in ("", SERVICE_NAME):
            await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        if stop is None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # (SIGHUP: its terminal closed, or a `kill
                loop.add_signal_handler(sig, _stopping, sig, stop)  # -HUP`; by default it died at once, its socket
                # left behind and no call drained; QA)
        log.log(NOTICE, "nestling daemon (%s) listening on unix:%s%s; loading the model", daemon.code_stamp,
                socket_path, f" and {config.tcp}" if tcp else "")
        loading = _start_loading(daemon, load_runtime)
        waiter = asyncio.ensure_future(stop.wait())
        await asyncio.wait({loading, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if loading.done():
            if loading.exception() is not None:  # a load failure: the server stops before the error is raised (left
                await server.stop(None)  # to the garbage collector, it stopped after the event loop: a traceback)
                loading.result()
            for name in ("", SERVICE_NAME):
                await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
            log.log(NOTICE, "nestling daemon ready: %s", daemon.runtime.summary())
            if on_ready:
                on_ready(daemon)
            await waiter
        daemon.stopping.set()
        lock.mark_stopping()  # (gRPC removes the socket as the stop begins: clients then read "stopping", not "gone")
        log.log(NOTICE, "nestling daemon shutting down%s", "" if loading.done() else " (the model load is abandoned)")
        await health_servicer.enter_graceful_shutdown()
        await server.stop(grace=10)
        if daemon.worker:
            await asyncio.to_thread(daemon.worker.stop)
        if not loading.done():  # (its outcome, a failure too, is no longer anyone's concern)
            loading.add_done_callback(lambda future: future.cancelled() or future.exception())
            return True
        return False
    finally:
        if ours is not None and _identity(socket_path) == ours:
            socket_path.unlink()
        lock.release()


def _stopping(sig: signal.Signals, stop: asyncio.Event) -> None:
    log.log(NOTICE, "received %s", sig.name)
    stop.set()


def _listen(server, address: str, flag: str) -> None:
    try:
        server.add_insecure_port(address)
    except RuntimeError as exc:  # grpc's "Failed to bind to address ..."
        raise DaemonError(f"{flag}: cannot listen there (in use, or not permitted): {exc}") from None


def _start_loading(daemon: Daemon, load_runtime) -> asyncio.Future:
    """`_load` in a daemon thread, its outcome in the returned future. (In asyncio.to_thread's executor a stop while
    loading waited for the load, since the event loop joins that executor's threads when it closes: `serve --stop`
    waited 10 s for the default model, and more than 20 minutes in float32 on a busy CPU.)"""
    loop = asyncio.get_running_loop()
    loading = loop.create_future()

    def settle(exc: BaseException | None) -> None:
        if not loading.done():
            loading.set_exception(exc) if exc is not None else loading.set_result(None)

    def load() -> None:
        try:
            _load(daemon, load_runtime)
            outcome = None
        except BaseException as exc:
            outcome = exc
        try:
            loop.call_soon_threadsafe(settle, outcome)
        except RuntimeError:  # the event loop has closed: the daemon stopped while this loaded
            pass

    threading.Thread(target=load, name="nestling-model-load", daemon=True).start()
    return loading


def _load(daemon: Daemon, load_runtime) -> None:
    runtime = load_runtime()
    service = CompletionService(runtime, daemon.config)
    if runtime.tree_source is not None and daemon.config.mode != "ar":
        _ = runtime.profile  # measure the verification cost now, not on the first keystroke
    if daemon.stopping.is_set():  # the daemon stopped while this loaded: no worker to start
        return
    daemon.runtime, daemon.service = runtime, service
    daemon.worker = ModelWorker(service, daemon.stats)
