"""`nestling status`: is the daemon up, what it runs, and how it has been doing (its GetStats)."""

from __future__ import annotations

import json


def add_parser(sub, add_model_options) -> None:
    p = sub.add_parser("status", help="show whether the daemon is serving, its model and its latency so far")
    add_daemon_options(p)
    p.add_argument("--json", action="store_true", help="print the daemon's stats as JSON")


def add_daemon_options(p, lead: str = "") -> None:
    """--socket, --tcp and --token: which daemon to ask (`lead` starts each help text)."""
    p.add_argument("--socket", help=f"{lead}the daemon's socket (default: the configured one)")
    p.add_argument("--tcp", help=f"{lead}the daemon's HOST:PORT instead of the socket")
    p.add_argument("--token", help=f"{lead}bearer token, if the daemon requires one (default: the configured one)")


def run(args) -> int:
    import os
    import sys

    from ..grpc_api.addresses import locked_socket
    from ..grpc_api.client import target_for, user_daemon
    from ..service.config import TOKEN_VARIABLE, config_path

    try:
        address, token = user_daemon(args.socket, args.tcp, args.token)
        config_problem = None
    except ValueError as exc:  # (status exited 2, "serves but refuses to tell", and --json printed nothing)
        if not str(exc).startswith(str(config_path())):  # (a flag of this command's: its error)
            raise
        config_problem = str(exc)
        address, token = target_for(args.socket, args.tcp), args.token or os.environ.get(TOKEN_VARIABLE)
        print(f"nestling status: warning: {config_problem}; asking the daemon at {address}", file=sys.stderr)
    state, stats, problem = _ask(address, token)
    pid = _lock_holder() if not args.socket and not args.tcp else None
    if state != "serving" and pid is not None and (named := locked_socket()) and f"unix:{named}" != address:
        address = f"unix:{named}"  # this user's daemon listens on a socket of its own (serve --socket): ask it there
        state, stats, problem = _ask(address, token)
    if problem:
        if not args.json:
            raise ValueError(problem)
        print(json.dumps({"state": state, "address": address, "error": problem, **_config(config_problem)}, indent=2))
        return 2
    if state != "serving":
        state, message = _not_serving(state, address, pid)
        print(json.dumps({"state": state, "address": address, "pid": pid, "message": message,
                          **_config(config_problem)}, indent=2) if args.json else message)
        return 1
    if args.json:
        from ..code_stamp import code_stamp

        print(json.dumps({"state": state, "address": address, "pid": pid, **as_dict(stats),
                          "installed_code_stamp": code_stamp(), **_config(config_problem)}, indent=2))
        return 0
    print("\n".join(describe(stats, address, pid)))
    return 0


def _config(problem: str | None) -> dict:
    """--json's `config_error`, where the config file could not be read."""
    return {"config_error": problem} if problem else {}


def _ask(address: str, token: str | None):
    """(health state, GetStats or None, a problem or None) of the daemon at `address`."""
    import grpc

    from ..grpc_api.client import Client

    with Client(address, token) as client:
        state = client.health_state()
        if state != "serving":
            return state, None, None
        try:
            return state, client.stats(), None
        except grpc.RpcError as exc:  # e.g. UNAUTHENTICATED: the daemon wants a token
            return state, None, f"the daemon at {address} answered {exc.code().name}: {exc.details()}"


def _lock_holder() -> int | None:
    """The pid of this user's daemon by its lock (None: none holds it, or it cannot be read)."""
    from ..grpc_api.daemon_lock import DaemonError, DaemonLock
    from ..service.config import runtime_dir

    try:
        return DaemonLock(runtime_dir()).holder()
    except DaemonError:
        return None


def _not_serving(state: str, address: str, pid: int | None) -> tuple[str, str]:
    """('loading' | 'unreachable' | 'starting' | 'absent', a sentence) for a daemon that does not serve completions
    now."""
    if state == "not serving":
        return "loading", (f"the nestling daemon{f' (pid {pid})' if pid else ''} at {address} is not serving yet: it "
                           f"is loading its model (or shutting down)")
    from ..grpc_api.addresses import lost_socket

    if pid is not None and (gone := lost_socket(address)):
        return "unreachable", (f"a nestling daemon (pid {pid}) is running, but its socket {gone} is gone (removed "
                               f"while it ran?): no client can reach it; `nestling serve --restart` replaces it")
    if pid is not None:  # it holds the lock but has not bound its socket yet (or has just closed it)
        return "starting", (f"a nestling daemon (pid {pid}) is running but does not answer at {address} yet: it is "
                            f"starting (or stopping); try again in a few seconds")
    return "absent", f"no nestling daemon serving at {address}; start one with `nestling serve --detach`"


def code_line(daemon_stamp: str) -> str:
    """The daemon's code stamp, and whether it is the code installed now (daemon/code_stamp.py)."""
    from ..code_stamp import stale_daemon_notice

    notice = stale_daemon_notice(daemon_stamp)
    return f"code      {daemon_stamp}: the code installed now" if notice is None else f"code      {notice}"


def describe(stats, address: str, pid: int | None) -> list[str]:
    """Human-readable lines for a GetStatsResponse."""
    first, total = stats.time_to_first_token, stats.total
    return [
        f"nestling daemon{f' (pid {pid})' if pid else ''} serving at {address}",
        f"model     {stats.model} on {stats.device} ({stats.dtype}{', packed weights' if stats.packed_weights else ''});"
        f" head {stats.head}{f' (not used: --mode {stats.mode})' if stats.mode in ('ar', 'lookup') else ''}",
        f"mode      {_mode(stats)}",
        f"exact     {_exactness(stats)}",
        f"uptime    {_duration(stats.uptime_s)}; " + (f"{stats.requests} completions, mean tau {stats.mean_tau:.2f}"
                                                       if stats.requests else "no completions yet"),
        f"not done  {stats.errors} failed, {stats.superseded} superseded by a newer one, {stats.cancelled} cancelled "
        f"by their client, {stats.deadline_exceeded} past their deadline",
        f"latency   first token p50 {first.p50_ms:.0f} ms, p95 {first.p95_ms:.0f}, p99 {first.p99_ms:.0f}; "
        f"whole completion p50 {total.p50_ms:.0f} ms, p95 {total.p95_ms:.0f}, p99 {total.p99_ms:.0f}"
        if stats.requests else "latency   none measured yet (no completions)",
        f"cache     {stats.cache_bytes / 2**20:.1f} MiB of {stats.cache_limit_bytes / 2**20:.0f} MiB, "
        f"{stats.cache_documents} document{'' if stats.cache_documents == 1 else 's'}"
        + (" (over the limit: the document asked last is kept whatever its size)"
           if stats.cache_bytes > stats.cache_limit_bytes else ""),
        f"prefills  {stats.prefills} files prepared on opening, {stats.prefilled_tokens} prompt tokens; "
        f"{stats.prefills_ahead} ahead of the next request, {stats.prefills_ahead_used} of them used",
        f"profile   {_profile(stats)}",
        code_line(stats.code_stamp),
    ]


def _mode(stats) -> str:
    """The decoding mode the daemon runs with (its --mode)."""
    if stats.mode:
        return stats.mode
    return "unknown until the model is loaded" if stats.model == "loading" else \
        "not reported (a daemon older than this client)"


def _profile(stats) -> str:
    """The cost profile the trees follow, in words."""
    if not stats.HasField("cost_profile"):
        return "not timed yet (at the first completion or prefill)"
    cost = stats.cost_profile
    draft = f", a draft step {cost.draft_step_ms:.1f} ms" if cost.draft_step_ms else ""
    kept = ("cached (`nestling profile` re-times it; the daemon takes the new one within seconds)" if cost.cached else
            "timed while other processes kept the CPU busy: not cached, timed again at the next start")
    return (f"a verify forward {cost.verify_one_ms:.0f} ms (one token) / {cost.verify_16_ms:.0f} ms (16 tokens){draft};"
            f" timed {cost.measured_at or 'at an unknown time'}, {kept}")


def _exactness(stats) -> str:
    """How close the outputs are to what the model alone would write, in words."""
    if stats.mode == "ar":
        return "by construction: plain decoding (--mode ar) verifies no trees"
    if stats.exact_rows:
        return f"bit for bit: trees of up to {stats.exact_rows} tokens verify with plain decoding's bits"
    if stats.dtype == "float32":
        return "in practice: trees verify as one block, in float32 no output has been seen to part"
    if not stats.device:
        return "unknown until the model is loaded"
    return (f"near-ties may part: trees verify as one block in {stats.dtype} (exact_trees off, a GPU, or this "
            "CPU's products failed the check at load)")


def as_dict(message) -> dict:
    """Every field of a message, numbers as JSON numbers (protobuf's own JSON writes 64-bit ones as strings)."""
    return {field.name: as_dict(getattr(message, field.name)) if field.message_type else getattr(message, field.name)
            for field in message.DESCRIPTOR.fields}


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"
