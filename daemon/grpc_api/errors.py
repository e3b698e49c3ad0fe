"""Errors are mapped to gRPC status codes in one place: this interceptor (plus the optional token check)."""

from __future__ import annotations

import asyncio
import hmac
import logging

import grpc

from ..service.completion import DeadlineExceeded, InvalidRequest, RequestTooLarge, Superseded, TooManyTokens
from .client import MAX_TOKENS_LIMIT_KEY

log = logging.getLogger(__name__)


class ModelLoading(Exception):
    """The daemon is still loading its model."""


class UndecodableRequest(Exception):
    """The request's bytes are not a message of its type (bad UTF-8 in a string field, truncated, ...): stands in
    for the request, so the handler's guard answers INVALID_ARGUMENT (gRPC itself would answer UNKNOWN and log a
    traceback)."""


def status_for(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    if isinstance(exc, (InvalidRequest, UndecodableRequest)):
        return grpc.StatusCode.INVALID_ARGUMENT, str(exc)
    if isinstance(exc, RequestTooLarge):
        return grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc)
    if isinstance(exc, DeadlineExceeded):
        return grpc.StatusCode.DEADLINE_EXCEEDED, str(exc)
    if isinstance(exc, Superseded):
        return grpc.StatusCode.CANCELLED, "superseded by a newer request for the same document"
    if isinstance(exc, ModelLoading):
        return grpc.StatusCode.UNAVAILABLE, "the model is still loading; retry shortly"
    return grpc.StatusCode.INTERNAL, f"completion failed: {type(exc).__name__}: {exc}"


def trailing_metadata_for(exc: BaseException) -> tuple[tuple[str, str], ...]:
    """What a client may act on without reading the message: the token limit a refused request went over."""
    return ((MAX_TOKENS_LIMIT_KEY, str(exc.limit)),) if isinstance(exc, TooManyTokens) else ()


class ErrorInterceptor(grpc.aio.ServerInterceptor):
    """Turns service exceptions into status codes, and refuses calls without the token when one is set."""

    def __init__(self, token: str | None = None):
        self.token = token

    async def intercept_service(self, continuation, details):
        handler = await continuation(details)
        if handler is None:
            return None
        if self.token and not details.method.startswith(("/grpc.health.", "/grpc.reflection.")):
            metadata = dict(details.invocation_metadata or ())
            scheme, given = (metadata.get("authorization", "").split(None, 1) + ["", ""])[:2]
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.encode(), self.token.encode()):  # (RFC 7235:
                # the scheme's case does not matter)
                return _reject(handler, grpc.StatusCode.UNAUTHENTICATED, "a valid 'authorization: Bearer' token is required")
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(_guard_unary(handler.unary_unary),
                                                       _lenient(handler.request_deserializer),
                                                       handler.response_serializer)
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(_guard_stream(handler.unary_stream),
                                                        _lenient(handler.request_deserializer),
                                                        handler.response_serializer)
        return handler


def _lenient(deserializer):
    if deserializer is None:
        return None

    def deserialize(data: bytes):
        try:
            return deserializer(data)
        except Exception as exc:  # protobuf's DecodeError, or anything a parser raises on bad bytes
            return UndecodableRequest(f"the request could not be decoded as a protobuf message: {exc}")

    return deserialize


async def _abort(context, exc: BaseException):
    code, message = status_for(exc)
    if code == grpc.StatusCode.INTERNAL:
        log.error("internal error: %s", message)
    await context.abort(code, message, trailing_metadata_for(exc))


def _guard_unary(behavior):
    async def guarded(request, context):
        try:
            if isinstance(request, UndecodableRequest):
                raise request
            return await behavior(request, context)
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as exc:
            await _abort(context, exc)

    return guarded


def _guard_stream(behavior):
    async def guarded(request, context):
        try:
            if isinstance(request, UndecodableRequest):
                raise request
            async for message in behavior(request, context):
                yield message
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as exc:
            await _abort(context, exc)

    return guarded


def _reject(handler, code, message):
    async def unary(request, context):
        await context.abort(code, message)

    async def stream(request, context):
        await context.abort(code, message)
        yield  # pragma: no cover

    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(stream, _lenient(handler.request_deserializer),
                                                    handler.response_serializer)
    return grpc.unary_unary_rpc_method_handler(unary, _lenient(handler.request_deserializer),
                                               handler.response_serializer)
