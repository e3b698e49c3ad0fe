"""`nestling lsp`: the language server (stdio; --tcp for debugging)."""

from __future__ import annotations


def add_parser(sub, add_model_options) -> None:
    p = sub.add_parser("lsp", help="run the language server on stdio (editors start this)")
    p.add_argument("--tcp", help="listen on HOST:PORT instead of stdio (debugging)")
    p.add_argument("--embedded", action="store_true", help="run the engine in this process instead of the daemon")
    p.add_argument("--log-file", help="write the server's log here (stdio carries the protocol)")
    add_model_options(p)


def run(args) -> int:
    import logging
    import sys

    from ...lsp.protocol import ResyncingInput
    from ...lsp.server import build_server, daemon_backend_factory, embedded_backend_factory
    from ..grpc_api.daemon_lock import DaemonError
    from ..grpc_api.addresses import parse_tcp_address

    tcp = parse_tcp_address(args.tcp) if args.tcp else None
    if tcp and not tcp[2]:
        raise DaemonError(f"--tcp {args.tcp!r} is not a loopback address; the language server has no "
                          "authentication, so it listens on loopback only")
    if args.log_file:
        logging.basicConfig(filename=args.log_file, level=logging.INFO, force=True)
    model_flags = []
    for flag in ("model", "head", "device", "dtype"):
        if getattr(args, flag):
            model_flags += [f"--{flag}", str(getattr(args, flag))]
    if args.embedded:
        factory = embedded_backend_factory(*_embedded_engine(args))
    else:
        factory = daemon_backend_factory(model_flags)
    server = build_server(factory)
    if tcp:
        server.start_tcp(tcp[0], tcp[1])
    else:
        server.start_io(stdin=ResyncingInput(sys.stdin.buffer))
    if args.embedded and not server.protocol.shut_down and server.backend is not None:
        server.backend.stop()  # (the editor went away without shutdown: the engine's worker ran on into the exit, and
        # the process ended in "terminate called without an active exception", SIGABRT; QA)
    return 0 if server.protocol.shut_down else 1  # LSP: exit without shutdown first is an error


def _embedded_engine(args):
    """(load_runtime, ServiceConfig) for --embedded: the config file's settings under the flags given, as the
    daemon would run them; a config file that cannot be read fails the model load, which every request reports."""
    from ..runtime import load_runtime
    from ..service.config import load_config

    try:
        config, _ = load_config({flag: getattr(args, flag) for flag in ("model", "head", "device", "dtype")},
                                named_file_must_exist=True)
    except ValueError as exc:
        problem = str(exc)

        def fail():
            from ...lsp.backend import BackendError

            raise BackendError(f"nestling could not start: {problem}")
        return fail, None
    return (lambda: load_runtime(config.model, config.head, config.device, config.dtype, progress=False,
                                 static_shapes=config.static_shapes, draft_gate=config.draft_gate,
                                 packed_weights=config.packed_weights, exact_trees=config.exact_trees)), config
