"""A real daemon (the gRPC server with its model worker) in a thread of the test process, on a Unix socket, over a
tiny random model: for the gRPC tests and the language server's daemon backend."""

import asyncio
import threading
import time
from dataclasses import dataclass

from nestling.daemon.grpc_api.client import Client, target_for
from nestling.daemon.grpc_api.server import serve
from nestling.daemon.models.target import load_target
from nestling.daemon.runtime import Runtime
from nestling.daemon.service.config import ServiceConfig
from nestling.daemon.speculative.drafter import TreeBudget
from tiny import informed_head

FORWARD_DELAY_S = 0.02  # each target forward also sleeps this long: long generations for cancel/deadline tests


@dataclass
class RunningDaemon:
    config: ServiceConfig
    client: Client
    daemon: object
    thread: threading.Thread
    loop: asyncio.AbstractEventLoop
    stop: asyncio.Event


def tiny_runtime(folder):
    target = load_target(str(folder), device="cpu", dtype="float32", progress=False)
    original = target.forward

    def slow_forward(*args, **kwargs):
        time.sleep(FORWARD_DELAY_S)
        return original(*args, **kwargs)

    target.forward = slow_forward
    return Runtime(target=target, head=informed_head(target), head_source="test", budget=TreeBudget(4, 4, 12))


def start_daemon(tmp_path, folder, load_gate: threading.Event | None = None, **settings) -> RunningDaemon:
    """A daemon serving in a thread of this process. `load_gate`: its model load waits for the event, and this returns
    once the daemon answers (health NOT_SERVING, `daemon` None) instead of once it serves."""
    config = ServiceConfig(socket=str(tmp_path / "run" / "daemon.sock"), max_document_chars=200_000, **settings)
    ready = threading.Event()
    holder = {}

    def load_runtime():
        if load_gate is not None:
            load_gate.wait(120)
        return tiny_runtime(folder)

    def main():
        async def run():
            holder["loop"] = asyncio.get_running_loop()
            holder["stop"] = asyncio.Event()
            await serve(config, load_runtime, on_ready=lambda d: (holder.update(daemon=d), ready.set()),
                        stop=holder["stop"])

        try:
            asyncio.run(run())
        except BaseException as exc:  # surface startup failures to the test
            holder["error"] = exc
            ready.set()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    client = Client(target_for(config.socket_path), config.token)
    if load_gate is None:
        assert ready.wait(120), "daemon did not start"
    else:
        deadline = time.monotonic() + 60
        while client.health_state(timeout=1.0) == "absent" and "error" not in holder and time.monotonic() < deadline:
            time.sleep(0.05)
    if "error" in holder:
        raise holder["error"]
    return RunningDaemon(config, client, holder.get("daemon"), thread, holder["loop"], holder["stop"])


def stop_daemon(running: RunningDaemon) -> None:
    running.client.close()
    running.loop.call_soon_threadsafe(running.stop.set)
    running.thread.join(60)
