"""`nestling complete FILE --line L --col C`: the completion at a position of a file, and its stats."""

from __future__ import annotations

import codecs
import json
import os
import re
import sys
from pathlib import Path

from ..context.fim import FimBudget, LfDocument, build_fim_prompt, lf_only, split_at
from ..context.languages import LanguageSpec, file_name_hint, find_language, language_table
from ..context.syntax import SyntaxDocument
from ..grpc_api.client import LINE_MODE_CODES
from ..modes import MODE_HELP, MODES
from ..service.postprocess import block_end, cursor_context, finalize, line_mode, settled_text
from .status import add_daemon_options

LOAD_WAIT_S = 300.0  # --daemon: how long to wait for a daemon that is still loading its model


def add_parser(sub, add_model_options) -> None:
    p = sub.add_parser("complete", help="complete the code at a position of a file")
    p.add_argument("file", type=source_path, help="source file; - reads it from stdin (--language names its language)")
    p.add_argument("--language", metavar="ID", type=str.lower,
                   help="the file's language, as an editor names it (python, typescriptreact, go, ...): by default the "
                        "one its suffix says")
    p.add_argument("--line", type=int, required=True, help="1-based line of the cursor")
    p.add_argument("--col", type=int, required=True, help="1-based column of the cursor (in characters)")
    p.add_argument("--max-tokens", type=int, default=64, help="most tokens to generate (default 64)")
    p.add_argument("--mode", choices=MODES, default="spec",
                   help="; ".join(f"{m}: {h}" for m, h in MODE_HELP.items()))
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int,
                   help="seed for sampling: the same seed gives the same text in every --mode "
                        "(float32; bfloat16: up to rounding)")
    p.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: text and stats; its `replaces` counts characters of the file's text "
                        "as read (its line breaks as they are, after a byte order mark)")
    p.add_argument("--daemon", action="store_true",
                   help="ask the running daemon (`nestling serve`) instead of loading the model here: the completion "
                        "an editor gets there (the daemon's prompt budget), without the seconds a model load takes")
    p.add_argument("--line-mode", choices=list(LINE_MODE_CODES), default="auto",
                   help="complete one line, several, or decide from the syntax (default auto), and cut the text there "
                        "as the daemon does for an editor")
    p.add_argument("--raw", action="store_true",
                   help="print the model's continuation as it wrote it, up to --max-tokens, without the daemon's "
                        "post-processing (by default the text is cut at the end of the line or block and what the "
                        "text after the cursor already has is dropped, as an editor shows it)")
    add_daemon_options(p, "with --daemon: ")
    add_model_options(p)


def check_sampling_flags(args) -> None:
    """--temperature, --top-p and --seed (complete's and bench's), checked before the model loads."""
    if not 0.0 < args.top_p <= 1.0 or not args.temperature >= 0:  # (nan is neither)
        raise ValueError("--top-p must be in (0, 1] and --temperature >= 0")
    if args.seed is not None and not 0 <= args.seed < 2**64:
        raise ValueError("--seed must be in 0 .. 2**64 - 1")


def warn_unused_sampling_flags(args, command: str = "complete") -> None:
    """--seed and --top-p shape sampling only: with greedy decoding (--temperature 0) say that they do nothing."""
    unused = [flag for flag, given in (("--seed", args.seed is not None), ("--top-p", args.top_p != 1.0)) if given]
    if args.temperature == 0 and unused:
        print(f"nestling {command}: warning: {' and '.join(unused)} {'apply' if len(unused) > 1 else 'applies'} only "
              "when sampling (--temperature above 0); greedy decoding ignores "
              f"{'them' if len(unused) > 1 else 'it'}", file=sys.stderr)


TEXT_SAMPLE_BYTES = 1 << 16  # how much of a file the text check reads


STDIN = Path("-")


def source_path(text: str) -> Path:
    """complete's FILE: STDIN for `-` only (`./-` is a file of that name: Path would make it `-` too)."""
    path = Path(text)
    return path.absolute() if path == STDIN and text != "-" else path


def read_source(path: Path) -> str:
    """The file's text (UTF-8; a byte order mark is neither text nor a column; its line breaks as they are), or
    stdin's for `-`; ValueError for a file that cannot be read or does not look like text (NUL bytes, or mostly bytes
    that are not UTF-8), before any model loads."""
    if path == STDIN and sys.stdin.isatty():  # (a pipe or a file says nothing: the wait would look like a hang)
        print("nestling: reading the source from the terminal; end it with Ctrl-D on a line of its own",
              file=sys.stderr, flush=True)
    try:
        data = sys.stdin.buffer.read() if path == STDIN else path.read_bytes()
    except OSError as exc:  # missing, a folder, unreadable
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    name = "stdin" if path == STDIN else path  # (in messages)
    if b"\0" in data:
        raise ValueError(f"{name} does not look like text (it has NUL bytes): give a source file")
    sample = data[:TEXT_SAMPLE_BYTES].decode("utf-8-sig", errors="replace")
    literal = data[:TEXT_SAMPLE_BYTES].count("\ufffd".encode())  # U+FFFD written in the file itself
    invalid = sample.count("\ufffd") - literal
    if invalid * 4 > len(sample):  # (a Latin-1 letter or two in a comment is still text)
        raise ValueError(f"{name} does not look like text ({invalid} of its first {len(sample)} characters are not "
                         "UTF-8): give a source file in UTF-8")
    text = data.decode("utf-8-sig", errors="replace")
    if "\ufffd" in text and text.count("\ufffd") > data.count("\ufffd".encode()):
        text = _not_utf8(name, data, text)
    return text


def raw_offset(raw: str, lf_offset: int) -> int:
    """Where offset `lf_offset` of lf_only(raw) lies in `raw` (each CRLF before it is one character more there)."""
    offset = lf_offset
    for pair in re.finditer("\r\n", raw):
        if pair.start() >= offset:
            break
        offset += 1
    return offset


def _not_utf8(path: Path | str, data: bytes, replaced: str) -> str:
    """The text of a file with bytes that are not UTF-8, and a warning: read as Windows-1252 (Latin-1 where that has
    no character) where nothing in it makes UTF-8 (`caf\\xe9`: café), else with U+FFFD for the bytes that are not (a
    completion that copies those holds it). UTF-8 shows in a byte order mark or any character beyond ASCII that reads."""
    literal = "\ufffd".encode()
    if not (data.startswith(codecs.BOM_UTF8) or literal in data or any(ord(c) > 127 and c != "\ufffd" for c in replaced)):
        try:
            text, codec = data.decode("cp1252"), "Windows-1252"
        except UnicodeDecodeError:  # (five bytes Windows-1252 leaves undefined)
            text, codec = data.decode("latin-1"), "Latin-1"
        print(f"nestling complete: warning: {path} is not UTF-8; read as {codec}", file=sys.stderr)
        return text
    bad = replaced.count("\ufffd") - data.count(literal)
    print(f"nestling complete: warning: {path} has {bad} byte{'s' * (bad != 1)} that {'are' if bad != 1 else 'is'} not "
          "UTF-8, read as U+FFFD (a completion that copies them holds U+FFFD)", file=sys.stderr)
    return replaced


def run(args) -> int:
    if args.max_tokens < 1:
        raise ValueError("--max-tokens must be at least 1")
    if any(not stop for stop in args.stop):
        raise ValueError("--stop takes a non-empty string (an empty one would end every completion at once)")
    check_sampling_flags(args)
    raw = read_source(args.file)
    language = _language(args)
    # every line break a LF, as the daemon reads a document (--line counts lines as editors do; the model writes other
    # code after CRLF)
    text = lf_only(raw)
    prefix, suffix = split_at(text, args.line - 1, args.col - 1)
    if args.daemon:
        if args.raw:
            raise ValueError("--raw does not go with --daemon: the daemon always cuts the text as an editor shows it; "
                             "drop one of them")
        warn_unused_sampling_flags(args)
        # the file as it is: the daemon's offsets (`replaces`) and text then are the file's, CRLFs and all
        return complete_on_daemon(args, raw, raw_offset(raw, len(prefix)))
    if args.socket or args.tcp or args.token:
        raise ValueError("--socket, --tcp and --token go with --daemon")
    if args.raw and args.line_mode != "auto":
        raise ValueError("--line-mode says where to cut the text, and --raw does not cut it: drop one of them")
    warn_unused_sampling_flags(args)
    return complete_here(args, text, prefix, suffix, LfDocument.of(raw, 0), language, raw_offset(raw, len(prefix)))


def _language(args) -> LanguageSpec | None:
    """The file's language: --language's, else its suffix's (as the daemon finds it); None (a neutral region) where
    neither names one nestling has a grammar for, with a warning where --language named one or the file is stdin."""
    named = find_language(args.language) if args.language else None
    language = named or find_language(None, None if args.file == STDIN else str(args.file))
    if named is None and (args.language or args.file == STDIN):
        known = ", ".join(sorted({i for spec in language_table().values() for i in spec.language_ids}))
        said = f"--language {args.language!r}: no grammar for it" if args.language else "stdin: give --language"
        fallback = f"using its suffix's, {language.name}" if language else "completing without its syntax"
        print(f"nestling complete: warning: {said} (those with one: {known}); {fallback}", file=sys.stderr)
    return language


def file_name(args) -> str | None:
    """The file's name as the prompt's hint of its language (`untitled.EXT` for stdin, from --language)."""
    return file_name_hint(None if args.file == STDIN else args.file.name, args.language)


def complete_here(args, text: str, prefix: str, suffix: str, document: LfDocument,
                  language: LanguageSpec | None, cursor: int) -> int:
    """The completion between `prefix` and `suffix` from the model loaded in this process, text (in the line breaks of
    the file `document` read, as the daemon gives it) then stats; `cursor`: the offset in the file (code points) the
    completion is inserted at, --json's `replaces` as the daemon's."""
    from ..runtime import load_runtime  # torch and the model: not for --daemon
    from ..speculative.accept import Sampling
    from ..speculative.engine import StopRule

    runtime = load_runtime(args.model, args.head, args.device, args.dtype)
    target = runtime.target
    prompt = build_fim_prompt(target.tokenizer, target.fim_tokens, prefix, suffix, path=file_name(args),
                              budget=FimBudget().fitted(target.positions))
    positions = target.positions
    if positions and len(prompt.token_ids) >= positions:  # ("give --max-tokens 0 at most" was refused in turn)
        raise ValueError(f"the prompt's {len(prompt.token_ids):,} tokens fill the {positions:,} positions of "
                         f"{target.name}: there is no room for a completion (its config.json's max_position_embeddings)")
    if positions and len(prompt.token_ids) + args.max_tokens > positions:
        raise ValueError(f"--max-tokens {args.max_tokens:,} after the prompt's {len(prompt.token_ids):,} tokens runs past "
                         f"the {positions:,} positions of {target.name}: give --max-tokens "
                         f"{max(positions - len(prompt.token_ids), 0):,} at most")
    region = SyntaxDocument(text, language).region_at(len(prefix))
    # the daemon's post-processing (service/completion.py): the same line mode, the same early stop at the end of the
    # line or block, the same cut; every --mode stops on the same text, so their outputs compare as before
    context = None if args.raw else cursor_context(prefix, suffix, region, language)
    shape = "raw" if context is None else line_mode(args.line_mode, context)
    text_end = None if context is None else (lambda t: block_end(t, context, shape))
    generation = runtime.engine(args.mode).generate(
        prompt.token_ids,
        Sampling(temperature=args.temperature, top_p=args.top_p, seed=args.seed),
        StopRule(max_new_tokens=args.max_tokens, stop_strings=tuple(args.stop), text_end=text_end),
        budget=runtime.budget_for(args.mode, region),
    ).run()
    stats = generation.stats
    shown = settled_text(generation.text or "") if context is None else finalize(generation.text or "", context, shape)
    shown = document.in_its_line_breaks(shown)
    if args.json:
        print(json.dumps({"text": shown, "replaces": {"start": cursor, "end": cursor}, "mode": args.mode,
                          "region": region.value, "line_mode": shape,
                          **runtime.describe(), "stats": stats_as_the_daemon_names_them(stats.to_dict())}))
        return 0
    sys.stdout.write(shown + "\n")
    print(
        f"-- {stats.new_tokens} tokens, mode {args.mode}, tau {stats.tau:.2f}, "
        f"{stats.decode_tokens_per_s:.1f} tok/s decode, prefill {stats.prefill_ms:.0f} ms "
        f"({stats.prompt_tokens} prompt tokens), total {stats.total_ms:.0f} ms, stop: {stats.stop_reason}, "
        f"region {region.value}, {'raw text' if context is None else f'line mode {shape}'}; "
        f"head: {runtime.head_source}",
        file=sys.stderr,
    )
    return 0


DAEMON_STATS_NAMES = {"new_tokens": "tokens", "reused_tokens": "reused_prefix_tokens",
                      "first_token_ms": "time_to_first_token_ms"}  # the engine's names -> CompletionStats' (the proto)


def stats_as_the_daemon_names_them(stats: dict) -> dict:
    """--json's stats with the names `complete --daemon --json` gives the same numbers (one parser reads both); the
    engine's other numbers (prefill, draft and verify time, accepted lengths, tree sizes) keep theirs."""
    return {DAEMON_STATS_NAMES.get(key, key): value for key, value in stats.items()}


def complete_on_daemon(args, text: str, cursor: int) -> int:
    """The completion at `cursor` (code points into `text`) from the running daemon, printed as run() prints its own."""
    import grpc

    from ...proto import completion_pb2 as pb
    from ..code_stamp import stale_daemon_notice
    from ..grpc_api.addresses import lost_socket, running_daemons_socket
    from ..grpc_api.client import Client, target_for, user_daemon
    from .status import as_dict

    request = daemon_request(args, text, cursor)
    address, token = user_daemon(args.socket, args.tcp, args.token)
    if not (args.socket or args.tcp) and (named := running_daemons_socket()):
        address = target_for(named)  # this user's daemon, on the socket it was started with (serve --socket)
    with Client(address, token) as client:
        if client.health_state() == "not serving":
            print(f"nestling complete: the daemon at {address} is not serving yet (loading its model); waiting up to "
                  f"{LOAD_WAIT_S:.0f} s", file=sys.stderr)
            client.wait_serving(LOAD_WAIT_S)
        if not client.serving():
            if gone := lost_socket(address):
                raise ValueError(f"this user's nestling daemon runs, but its socket {gone} is gone (removed while it "
                                 "ran?): `nestling serve --restart` replaces it, or drop --daemon to load the model "
                                 "here")
            raise ValueError(f"no nestling daemon serving at {address}: start one with `nestling serve --detach`, or "
                             "drop --daemon to load the model here")
        try:
            response = client.complete(request, timeout=600)
            daemon_stats = client.stats()
            notice = stale_daemon_notice(daemon_stats.code_stamp)
        except grpc.RpcError as exc:  # UNAUTHENTICATED, INVALID_ARGUMENT, ...
            raise ValueError(f"the daemon at {address} answered {exc.code().name}: {exc.details()}") from None
    empty = pb.CompletionItem(replaces=pb.Range(start=cursor, end=cursor))  # (nothing to insert at the cursor)
    item, stats = response.items[0] if response.items else empty, response.stats
    if args.json:
        runs = {name: getattr(daemon_stats, name) for name in ("model", "device", "dtype", "head", "exact_rows",
                                                                "packed_weights")}  # as local --json names them
        print(json.dumps({"text": item.text, "replaces": as_dict(item.replaces), "mode": stats.mode,
                          "region": stats.region, "line_mode": stats.line_mode, **runs, "daemon": address,
                          "stats": as_dict(stats)}), flush=True)
    else:
        sys.stdout.write(item.text + "\n")
        sys.stdout.flush()  # the text before what stderr says of it
    if notice:
        print(f"nestling complete: warning: {notice}", file=sys.stderr)
    if args.json:
        return 0
    print(f"-- {stats.tokens} tokens, mode {stats.mode}, tau {stats.tau:.2f}, {stats.prompt_tokens} prompt tokens "
          f"({stats.reused_prefix_tokens} reused), first token {stats.time_to_first_token_ms:.0f} ms, total "
          f"{stats.total_ms:.0f} ms (queued {stats.queue_ms:.0f}), stop: {stats.stop_reason}, region {stats.region}; "
          f"daemon at {address}", file=sys.stderr)
    return 0


def daemon_request(args, text: str, cursor: int):
    """The daemon's CompleteRequest for complete's flags; ValueError for flags the daemon cannot take."""
    from ...proto import completion_pb2 as pb
    from ..grpc_api.client import full_text_request

    given = [f"--{name}" for name in ("model", "head", "device", "dtype") if getattr(args, name) is not None]
    if given:
        raise ValueError(f"--daemon completes with the daemon's model and head: drop {', '.join(given)} "
                         "(`nestling status` shows what it runs)")
    if args.mode not in ("spec", "ar"):
        raise ValueError(f"--daemon decodes with --mode spec or ar, not {args.mode}")
    if args.seed == 0:
        raise ValueError("--seed 0 reads as unseeded over --daemon: give another seed")
    mode = pb.DECODING_MODE_AUTOREGRESSIVE if args.mode == "ar" else pb.DECODING_MODE_SPECULATIVE
    # stdin: a new buffer's URI, as an editor names one (its language from --language), one per process: two scripts
    # piping text at once are two documents, not a newer request superseding the other's
    uri = f"untitled:stdin-{os.getpid()}" if args.file == STDIN else args.file.resolve().as_uri()
    return full_text_request(uri, text, cursor, language_id=args.language or "", max_tokens=args.max_tokens,
                             temperature=args.temperature, top_p=args.top_p, seed=args.seed or 0, stop=args.stop,
                             line_mode=LINE_MODE_CODES[args.line_mode], mode=mode)
