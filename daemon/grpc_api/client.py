"""A small client for the daemon (used by the CLI, the benchmark and the language server)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ...proto import completion_pb2 as pb
from ...proto import completion_pb2_grpc as pb_grpc
from .addresses import check_socket_owner


def target_for(socket: str | Path | None = None, tcp: str | None = None) -> str:
    """A gRPC target string: unix:<path> (default: the user's daemon socket) or host:port."""
    if tcp:
        host, colon, port = tcp.rpartition(":")
        if not (colon and host and port.isdigit() and 0 < int(port) < 65536):
            from .daemon_lock import DaemonError

            raise DaemonError(f"--tcp {tcp!r}: expected HOST:PORT with a port in 1..65535, e.g. 127.0.0.1:7878")
        return tcp
    if socket is None:
        from ..service.config import ServiceConfig

        socket = ServiceConfig().socket_path
    return f"unix:{socket}"


def user_daemon(socket: str | Path | None = None, tcp: str | None = None,
                token: str | None = None) -> tuple[str, str | None]:
    """The gRPC target and bearer token of the user's daemon: the values given (the token also as $NESTLING_TOKEN),
    else the config file's socket and token (the daemon listens on its socket even when it also listens on TCP), else the defaults. A ValueError
    names a config file that cannot be read."""
    from ..service.config import TOKEN_VARIABLE, load_config

    token = token or os.environ.get(TOKEN_VARIABLE) or None  # the daemon's own way to keep it out of `ps`
    config, _ = load_config({"socket": str(socket) if socket else None, "token": token})
    return target_for(config.socket_path, tcp), config.token


MAX_TOKENS_LIMIT_KEY = "nestling-max-tokens-limit"  # trailing metadata of a refusal of options.max_tokens: the
# daemon's max_tokens_limit, which the client may ask for instead


def max_tokens_limit_of(exc: grpc.RpcError) -> int | None:
    """The daemon's max_tokens_limit where `exc` refused a request for more tokens than it, else None."""
    if exc.code() != grpc.StatusCode.INVALID_ARGUMENT:
        return None
    given = dict(exc.trailing_metadata() or ()).get(MAX_TOKENS_LIMIT_KEY, "")
    return int(given) if given.isdigit() and int(given) > 0 else None


# the request's line mode by the name the CLI, the language server and the service use
LINE_MODE_CODES = {"auto": pb.LINE_MODE_AUTO, "single": pb.LINE_MODE_SINGLE, "multi": pb.LINE_MODE_MULTI}

# The daemon is local: after a failed connection (it is starting or restarting), try again within a second
# instead of gRPC's default backoff, which grows to two minutes.
CHANNEL_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 1000))


def full_text_request(uri: str, text: str, cursor: int, language_id: str = "", client: str = "", **options
                      ) -> pb.CompleteRequest:
    return pb.CompleteRequest(document=pb.Document(uri=uri, language_id=language_id, client=client,
                                                   full=pb.FullText(text=text, cursor_offset=cursor)),
                              options=pb.Options(**options))


def prefill_request(uri: str, text: str, cursor: int, language_id: str = "", client: str = "") -> pb.PrefillRequest:
    return pb.PrefillRequest(document=pb.Document(uri=uri, language_id=language_id, client=client,
                                                  full=pb.FullText(text=text, cursor_offset=cursor)))


def health_state_of(reply: health_pb2.HealthCheckResponse) -> str:
    """'serving', or 'not serving': the daemon answers but is loading its model or shutting down."""
    return "serving" if reply.status == health_pb2.HealthCheckResponse.SERVING else "not serving"


class Client:
    """Blocking client. `token` is sent as a bearer token when the daemon requires one."""

    def __init__(self, target: str, token: str | None = None):
        check_socket_owner(target)
        self.channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
        self.stub = pb_grpc.CompletionStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def serving(self, timeout: float = 2.0) -> bool:
        return self.health_state(timeout) == "serving"

    def health_state(self, timeout: float = 2.0) -> str:
        """'serving'; 'not serving': a daemon answers but is loading its model or shutting down; 'absent': none answers
        (or it refused the call)."""
        try:
            reply = self.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
        except grpc.RpcError:
            return "absent"
        return health_state_of(reply)

    def wait_serving(self, timeout: float) -> str:
        """Polls until the daemon serves or `timeout` seconds pass; the last health_state()."""
        deadline = time.monotonic() + timeout
        while (state := self.health_state()) == "not serving" and time.monotonic() < deadline:
            time.sleep(0.25)
        return state

    def complete(self, request: pb.CompleteRequest, timeout: float | None = None) -> pb.CompleteResponse:
        return self.stub.Complete(request, timeout=timeout, metadata=self.metadata)

    def stream(self, request: pb.CompleteRequest, timeout: float | None = None):
        return self.stub.CompleteStream(request, timeout=timeout, metadata=self.metadata)

    def stats(self, timeout: float = 5.0) -> pb.GetStatsResponse:
        return self.stub.GetStats(pb.GetStatsRequest(), timeout=timeout, metadata=self.metadata)

    def prefill(self, request: pb.PrefillRequest, timeout: float | None = None) -> pb.PrefillResponse:
        return self.stub.Prefill(request, timeout=timeout, metadata=self.metadata)

    def prefill_future(self, request: pb.PrefillRequest, timeout: float | None = None):
        """The Prefill call in the background: a future whose result() is the PrefillResponse."""
        return self.stub.Prefill.future(request, timeout=timeout, metadata=self.metadata)


class AsyncClient:
    """asyncio client (grpc.aio), for the language server."""

    def __init__(self, target: str, token: str | None = None):
        check_socket_owner(target)
        self.channel = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        self.stub = pb_grpc.CompletionStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()

    async def close(self) -> None:
        await self.channel.close()

    async def serving(self, timeout: float = 2.0) -> bool:
        return await self.health_state(timeout) == "serving"

    async def health_state(self, timeout: float = 2.0) -> str:
        """As Client.health_state, but waits up to `timeout` for the channel to connect: failing at once while it is
        between reconnection attempts read as "no daemon" and made the language server start a second one."""
        try:
            reply = await self.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout,
                                            wait_for_ready=True)
        except grpc.RpcError:
            return "absent"
        return health_state_of(reply)

    async def wait_serving(self, timeout: float) -> str:
        """Polls until the daemon serves or `timeout` seconds pass; the last health_state()."""
        deadline = time.monotonic() + timeout
        while (state := await self.health_state(timeout=2.0)) == "not serving" and time.monotonic() < deadline:
            await asyncio.sleep(0.25)
        return state

    async def complete(self, request: pb.CompleteRequest, timeout: float | None = None) -> pb.CompleteResponse:
        return await self.stub.Complete(request, timeout=timeout, metadata=self.metadata)

    async def stats(self, timeout: float = 5.0) -> pb.GetStatsResponse:
        return await self.stub.GetStats(pb.GetStatsRequest(), timeout=timeout, metadata=self.metadata)

    async def prefill(self, request: pb.PrefillRequest, timeout: float | None = None) -> pb.PrefillResponse:
        """Waits (within `timeout`) for the channel to connect rather than failing at once while it retries."""
        return await self.stub.Prefill(request, timeout=timeout, metadata=self.metadata, wait_for_ready=True)
