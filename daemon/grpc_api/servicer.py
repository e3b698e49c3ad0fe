"""The Completion service's handlers: parse, hand to the model worker, convert back. Errors are the
interceptor's business; model work never runs on the event loop."""

from __future__ import annotations

import asyncio

from ...proto import completion_pb2 as pb
from ...proto import completion_pb2_grpc as pb_grpc
from ..service.completion import PrefillResult, Superseded
from . import convert
from .errors import ModelLoading


class CompletionServicer(pb_grpc.CompletionServicer):
    def __init__(self, daemon):
        self.daemon = daemon  # the server's state: worker, service, stats (None until the model is loaded)

    def _ready(self):
        if self.daemon.worker is None:
            raise ModelLoading()
        return self.daemon.worker

    async def Complete(self, request, context):
        worker = self._ready()
        core = convert.request_from_proto(request, context.time_remaining())
        self.daemon.service.validate(core)
        job = worker.submit(core)
        try:
            return convert.response_to_proto(await asyncio.wrap_future(job.future))
        except asyncio.CancelledError:
            worker.cancel(job)
            raise

    async def CompleteStream(self, request, context):
        worker = self._ready()
        core = convert.request_from_proto(request, context.time_remaining())
        self.daemon.service.validate(core)
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue[str | None] = asyncio.Queue()  # text pieces in order, then None when done
        job = worker.submit(core, on_text=lambda text: loop.call_soon_threadsafe(pieces.put_nowait, text))
        job.future.add_done_callback(lambda _: loop.call_soon_threadsafe(pieces.put_nowait, None))
        try:
            while (piece := await pieces.get()) is not None:
                yield pb.CompleteChunk(text=piece)
            yield convert.final_chunk(job.future.result())
        except asyncio.CancelledError:
            worker.cancel(job)
            raise

    async def Prefill(self, request, context):
        worker = self._ready()
        core = convert.prefill_from_proto(request)
        self.daemon.service.validate(core)
        job = worker.submit(core)
        try:
            return convert.prefill_to_proto(await asyncio.wrap_future(job.future))
        except Superseded:  # a completion request or a newer prefill came before it started
            return convert.prefill_to_proto(PrefillResult())
        except asyncio.CancelledError:
            worker.cancel(job)
            raise

    async def GetStats(self, request, context):
        daemon = self.daemon
        described = daemon.runtime.describe() if daemon.runtime else {"model": "loading", "device": "", "dtype": "",
                                                                       "head": ""}
        cache = daemon.service.sessions.snapshot if daemon.service else (0, 0)
        limit = daemon.service.sessions.limit_bytes if daemon.service else 0
        profile = daemon.runtime.profile_summary() if daemon.runtime else None
        mode = daemon.config.mode if daemon.runtime else ""
        return convert.stats_response(described, daemon.stats.snapshot(), cache, limit, profile, daemon.code_stamp,
                                      mode)

