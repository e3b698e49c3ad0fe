"""Edge conversions between protocol messages and the service's own types (nothing else sees either side)."""

from __future__ import annotations

import time

from ...proto import completion_pb2 as pb
from ..service.completion import CompletionRequest, CompletionResult, CompletionStats, PrefillRequest, PrefillResult

LINE_MODES = {pb.LINE_MODE_AUTO: "auto", pb.LINE_MODE_SINGLE: "single", pb.LINE_MODE_MULTI: "multi"}
DECODING_MODES = {pb.DECODING_MODE_SPECULATIVE: "spec", pb.DECODING_MODE_AUTOREGRESSIVE: "ar"}


def document_fields(document: pb.Document) -> dict:
    """The document's fields as the core requests name them (no content: text and prefix stay None)."""
    content = document.WhichOneof("content")
    text = cursor = prefix = suffix = None
    if content == "full":
        text, cursor = document.full.text, document.full.cursor_offset
    elif content == "parts":
        prefix, suffix = document.parts.prefix, document.parts.suffix
    return dict(uri=document.uri, language_id=document.language_id, client=document.client, text=text, cursor=cursor,
                prefix=prefix, suffix=suffix)


def prefill_from_proto(message: pb.PrefillRequest) -> PrefillRequest:
    return PrefillRequest(**document_fields(message.document))


def prefill_to_proto(result: PrefillResult) -> pb.PrefillResponse:
    return pb.PrefillResponse(prompt_tokens=result.prompt_tokens, reused_tokens=result.reused_tokens,
                              prefilled_tokens=result.prefilled_tokens, complete=result.complete,
                              total_ms=result.total_ms)


def request_from_proto(message: pb.CompleteRequest, time_remaining: float | None) -> CompletionRequest:
    """The core request; unknown enum values become names the service's validation rejects by field."""
    options = message.options
    return CompletionRequest(
        **document_fields(message.document),
        max_tokens=options.max_tokens,
        line_mode=LINE_MODES.get(options.line_mode, f"unknown({options.line_mode})"),
        temperature=options.temperature,
        top_p=options.top_p or 1.0,
        alternatives=options.alternatives or 1,
        stop=tuple(options.stop),
        mode=DECODING_MODES.get(options.mode, f"unknown({options.mode})"),
        seed=options.seed or None,
        deadline=time.monotonic() + time_remaining if time_remaining is not None else None,
    )


def stats_to_proto(stats: CompletionStats) -> pb.CompletionStats:
    return pb.CompletionStats(
        tokens=stats.tokens, tau=stats.tau, prompt_tokens=stats.prompt_tokens,
        reused_prefix_tokens=stats.reused_prefix_tokens, time_to_first_token_ms=stats.time_to_first_token_ms,
        total_ms=stats.total_ms, queue_ms=stats.queue_ms, region=stats.region, stop_reason=stats.stop_reason,
        mode=stats.mode, line_mode=stats.line_mode)


def items_to_proto(result: CompletionResult) -> list[pb.CompletionItem]:
    return [pb.CompletionItem(text=i.text, replaces=pb.Range(start=i.replace_start, end=i.replace_end))
            for i in result.items]


def response_to_proto(result: CompletionResult) -> pb.CompleteResponse:
    return pb.CompleteResponse(items=items_to_proto(result), stats=stats_to_proto(result.stats))


def final_chunk(result: CompletionResult) -> pb.CompleteChunk:
    return pb.CompleteChunk(done=True, items=items_to_proto(result), stats=stats_to_proto(result.stats))


def stats_response(described: dict, snapshot: dict, cache: tuple[int, int], cache_limit: int,
                   profile: dict | None = None, code_stamp: str = "", mode: str = "") -> pb.GetStatsResponse:
    def percentiles(values: dict) -> pb.LatencyPercentiles:
        return pb.LatencyPercentiles(p50_ms=values["p50"], p95_ms=values["p95"], p99_ms=values["p99"])

    return pb.GetStatsResponse(
        model=described["model"], device=described["device"], dtype=described["dtype"], head=described["head"],
        uptime_s=snapshot["uptime_s"], requests=snapshot["requests"], errors=snapshot["errors"],
        superseded=snapshot["superseded"], cancelled=snapshot["cancelled"],
        deadline_exceeded=snapshot["deadline_exceeded"], mean_tau=snapshot["mean_tau"],
        time_to_first_token=percentiles(snapshot["first_token"]), total=percentiles(snapshot["total"]),
        cache_bytes=cache[0], cache_documents=cache[1], cache_limit_bytes=cache_limit,
        prefills=snapshot["prefills"], prefilled_tokens=snapshot["prefilled_tokens"],
        prefills_ahead=snapshot["prefills_ahead"], prefills_ahead_used=snapshot["prefills_ahead_used"],
        exact_rows=described.get("exact_rows", 0), packed_weights=described.get("packed_weights", False),
        cost_profile=pb.CostProfile(**profile) if profile else None, code_stamp=code_stamp, mode=mode)
