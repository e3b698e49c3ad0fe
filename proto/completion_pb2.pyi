from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LineMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LINE_MODE_AUTO: _ClassVar[LineMode]
    LINE_MODE_SINGLE: _ClassVar[LineMode]
    LINE_MODE_MULTI: _ClassVar[LineMode]

class DecodingMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DECODING_MODE_SPECULATIVE: _ClassVar[DecodingMode]
    DECODING_MODE_AUTOREGRESSIVE: _ClassVar[DecodingMode]
LINE_MODE_AUTO: LineMode
LINE_MODE_SINGLE: LineMode
LINE_MODE_MULTI: LineMode
DECODING_MODE_SPECULATIVE: DecodingMode
DECODING_MODE_AUTOREGRESSIVE: DecodingMode

class Document(_message.Message):
    __slots__ = ("uri", "language_id", "full", "parts", "client")
    URI_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_ID_FIELD_NUMBER: _ClassVar[int]
    FULL_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    uri: str
    language_id: str
    full: FullText
    parts: PrefixSuffix
    client: str
    def __init__(self, uri: _Optional[str] = ..., language_id: _Optional[str] = ..., full: _Optional[_Union[FullText, _Mapping]] = ..., parts: _Optional[_Union[PrefixSuffix, _Mapping]] = ..., client: _Optional[str] = ...) -> None: ...

class FullText(_message.Message):
    __slots__ = ("text", "cursor_offset")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CURSOR_OFFSET_FIELD_NUMBER: _ClassVar[int]
    text: str
    cursor_offset: int
    def __init__(self, text: _Optional[str] = ..., cursor_offset: _Optional[int] = ...) -> None: ...

class PrefixSuffix(_message.Message):
    __slots__ = ("prefix", "suffix")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    SUFFIX_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    suffix: str
    def __init__(self, prefix: _Optional[str] = ..., suffix: _Optional[str] = ...) -> None: ...

class Options(_message.Message):
    __slots__ = ("max_tokens", "line_mode", "temperature", "top_p", "alternatives", "stop", "mode", "seed")
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LINE_MODE_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    ALTERNATIVES_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    max_tokens: int
    line_mode: LineMode
    temperature: float
    top_p: float
    alternatives: int
    stop: _containers.RepeatedScalarFieldContainer[str]
    mode: DecodingMode
    seed: int
    def __init__(self, max_tokens: _Optional[int] = ..., line_mode: _Optional[_Union[LineMode, str]] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., alternatives: _Optional[int] = ..., stop: _Optional[_Iterable[str]] = ..., mode: _Optional[_Union[DecodingMode, str]] = ..., seed: _Optional[int] = ...) -> None: ...

class CompleteRequest(_message.Message):
    __slots__ = ("document", "options")
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    document: Document
    options: Options
    def __init__(self, document: _Optional[_Union[Document, _Mapping]] = ..., options: _Optional[_Union[Options, _Mapping]] = ...) -> None: ...

class Range(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: int
    end: int
    def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class CompletionItem(_message.Message):
    __slots__ = ("text", "replaces")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    REPLACES_FIELD_NUMBER: _ClassVar[int]
    text: str
    replaces: Range
    def __init__(self, text: _Optional[str] = ..., replaces: _Optional[_Union[Range, _Mapping]] = ...) -> None: ...

class CompletionStats(_message.Message):
    __slots__ = ("tokens", "tau", "prompt_tokens", "reused_prefix_tokens", "time_to_first_token_ms", "total_ms", "queue_ms", "region", "stop_reason", "mode", "line_mode")
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    TAU_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REUSED_PREFIX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TIME_TO_FIRST_TOKEN_MS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_MS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_MS_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    LINE_MODE_FIELD_NUMBER: _ClassVar[int]
    tokens: int
    tau: float
    prompt_tokens: int
    reused_prefix_tokens: int
    time_to_first_token_ms: float
    total_ms: float
    queue_ms: float
    region: str
    stop_reason: str
    mode: str
    line_mode: str
    def __init__(self, tokens: _Optional[int] = ..., tau: _Optional[float] = ..., prompt_tokens: _Optional[int] = ..., reused_prefix_tokens: _Optional[int] = ..., time_to_first_token_ms: _Optional[float] = ..., total_ms: _Optional[float] = ..., queue_ms: _Optional[float] = ..., region: _Optional[str] = ..., stop_reason: _Optional[str] = ..., mode: _Optional[str] = ..., line_mode: _Optional[str] = ...) -> None: ...

class CompleteResponse(_message.Message):
    __slots__ = ("items", "stats")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[CompletionItem]
    stats: CompletionStats
    def __init__(self, items: _Optional[_Iterable[_Union[CompletionItem, _Mapping]]] = ..., stats: _Optional[_Union[CompletionStats, _Mapping]] = ...) -> None: ...

class CompleteChunk(_message.Message):
    __slots__ = ("text", "done", "items", "stats")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    text: str
    done: bool
    items: _containers.RepeatedCompositeFieldContainer[CompletionItem]
    stats: CompletionStats
    def __init__(self, text: _Optional[str] = ..., done: _Optional[bool] = ..., items: _Optional[_Iterable[_Union[CompletionItem, _Mapping]]] = ..., stats: _Optional[_Union[CompletionStats, _Mapping]] = ...) -> None: ...

class PrefillRequest(_message.Message):
    __slots__ = ("document",)
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    document: Document
    def __init__(self, document: _Optional[_Union[Document, _Mapping]] = ...) -> None: ...

class PrefillResponse(_message.Message):
    __slots__ = ("prompt_tokens", "reused_tokens", "prefilled_tokens", "complete", "total_ms")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REUSED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PREFILLED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_MS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    reused_tokens: int
    prefilled_tokens: int
    complete: bool
    total_ms: float
    def __init__(self, prompt_tokens: _Optional[int] = ..., reused_tokens: _Optional[int] = ..., prefilled_tokens: _Optional[int] = ..., complete: _Optional[bool] = ..., total_ms: _Optional[float] = ...) -> None: ...

class GetStatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LatencyPercentiles(_message.Message):
    __slots__ = ("p50_ms", "p95_ms", "p99_ms")
    P50_MS_FIELD_NUMBER: _ClassVar[int]
    P95_MS_FIELD_NUMBER: _ClassVar[int]
    P99_MS_FIELD_NUMBER: _ClassVar[int]
    p50_ms: float
    p95_ms: float
    p99_ms: float
    def __init__(self, p50_ms: _Optional[float] = ..., p95_ms: _Optional[float] = ..., p99_ms: _Optional[float] = ...) -> None: ...

class GetStatsResponse(_message.Message):
    __slots__ = ("model", "device", "dtype", "head", "uptime_s", "requests", "errors", "superseded", "cancelled", "deadline_exceeded", "mean_tau", "time_to_first_token", "total", "cache_bytes", "cache_documents", "cache_limit_bytes", "prefills", "prefilled_tokens", "prefills_ahead", "prefills_ahead_used", "exact_rows", "packed_weights", "cost_profile", "code_stamp", "mode")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_EXCEEDED_FIELD_NUMBER: _ClassVar[int]
    MEAN_TAU_FIELD_NUMBER: _ClassVar[int]
    TIME_TO_FIRST_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    CACHE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CACHE_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    CACHE_LIMIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    PREFILLS_FIELD_NUMBER: _ClassVar[int]
    PREFILLED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PREFILLS_AHEAD_FIELD_NUMBER: _ClassVar[int]
    PREFILLS_AHEAD_USED_FIELD_NUMBER: _ClassVar[int]
    EXACT_ROWS_FIELD_NUMBER: _ClassVar[int]
    PACKED_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    COST_PROFILE_FIELD_NUMBER: _ClassVar[int]
    CODE_STAMP_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    model: str
    device: str
    dtype: str
    head: str
    uptime_s: float
    requests: int
    errors: int
    superseded: int
    cancelled: int
    deadline_exceeded: int
    mean_tau: float
    time_to_first_token: LatencyPercentiles
    total: LatencyPercentiles
    cache_bytes: int
    cache_documents: int
    cache_limit_bytes: int
    prefills: int
    prefilled_tokens: int
    prefills_ahead: int
    prefills_ahead_used: int
    exact_rows: int
    packed_weights: bool
    cost_profile: CostProfile
    code_stamp: str
    mode: str
    def __init__(self, model: _Optional[str] = ..., device: _Optional[str] = ..., dtype: _Optional[str] = ..., head: _Optional[str] = ..., uptime_s: _Optional[float] = ..., requests: _Optional[int] = ..., errors: _Optional[int] = ..., superseded: _Optional[int] = ..., cancelled: _Optional[int] = ..., deadline_exceeded: _Optional[int] = ..., mean_tau: _Optional[float] = ..., time_to_first_token: _Optional[_Union[LatencyPercentiles, _Mapping]] = ..., total: _Optional[_Union[LatencyPercentiles, _Mapping]] = ..., cache_bytes: _Optional[int] = ..., cache_documents: _Optional[int] = ..., cache_limit_bytes: _Optional[int] = ..., prefills: _Optional[int] = ..., prefilled_tokens: _Optional[int] = ..., prefills_ahead: _Optional[int] = ..., prefills_ahead_used: _Optional[int] = ..., exact_rows: _Optional[int] = ..., packed_weights: _Optional[bool] = ..., cost_profile: _Optional[_Union[CostProfile, _Mapping]] = ..., code_stamp: _Optional[str] = ..., mode: _Optional[str] = ...) -> None: ...

class CostProfile(_message.Message):
    __slots__ = ("verify_one_ms", "verify_16_ms", "draft_step_ms", "measured_at", "cached")
    VERIFY_ONE_MS_FIELD_NUMBER: _ClassVar[int]
    VERIFY_16_MS_FIELD_NUMBER: _ClassVar[int]
    DRAFT_STEP_MS_FIELD_NUMBER: _ClassVar[int]
    MEASURED_AT_FIELD_NUMBER: _ClassVar[int]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    verify_one_ms: float
    verify_16_ms: float
    draft_step_ms: float
    measured_at: str
    cached: bool
    def __init__(self, verify_one_ms: _Optional[float] = ..., verify_16_ms: _Optional[float] = ..., draft_step_ms: _Optional[float] = ..., measured_at: _Optional[str] = ..., cached: _Optional[bool] = ...) -> None: ...
