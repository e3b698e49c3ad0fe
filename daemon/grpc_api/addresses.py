"""Where the daemon and the language server listen: a --tcp address (loopback unless allowed otherwise) and a
--socket path. Light on imports: `nestling lsp` checks its --tcp without loading the server."""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import stat
from pathlib import Path

from .daemon_lock import DaemonError, DaemonLock

MAX_SOCKET_PATH_BYTES = 107  # sun_path holds 108 bytes on Linux, the last a NUL


def parse_tcp_address(address: str) -> tuple[str, int, bool]:
    """HOST:PORT (an IP address or localhost; IPv6 in brackets) -> (host, port, whether it is loopback)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise DaemonError(f"--tcp {address!r}: expected HOST:PORT with a port in 1..65535, e.g. 127.0.0.1:7878")
    host = host.strip("[]")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        raise DaemonError(f"--tcp {address!r}: {host!r} is not an IP address") from None
    return host, int(port), loopback


def check_tcp_address(address: str, allow_remote: bool, token: str | None) -> tuple[str, int]:
    host, port, loopback = parse_tcp_address(address)
    if not loopback and not (allow_remote and token):
        raise DaemonError(f"--tcp {address!r} is not a loopback address; nestling is local-only unless "
                          f"--allow-remote and a --token are both given")
    return host, port


def tcp_listen_problem(host: str, port: int, holder: int | None = None) -> str | None:
    """Why a daemon could not listen on host:port (the OS's words), found by binding there for a moment; None where it
    could, or where the port is taken by process `holder` (the daemon a restart stops, which frees it)."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return str(exc)
    problem = None
    for family, kind, proto, _, address in found:  # (gRPC listens where it can: one address of localhost will do)
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # (as gRPC's: a closed port's TIME_WAIT is no
            try:  # obstacle)
                probe.bind(address)
                return None
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE and holder is not None and \
                        listens_on(holder, port, address[0]) is not False:
                    return None
                problem = exc.strerror or str(exc)
    return problem


def listens_on(pid: int, port: int, host: str | None = None) -> bool | None:
    """Whether process `pid` has a TCP socket listening on `port` (at an address that takes `host`'s connections, where
    given: it, a wildcard, or its IPv4-mapped form; Linux's /proc); None where /proc cannot say."""
    wanted = ipaddress.ip_address(host.split("%")[0]) if host else None
    inodes, read = set(), False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        read = True
        for row in rows:  # "sl local_address rem_address st ... inode": address "HEX:PORTHEX", st 0A = LISTEN
            fields = row.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port and \
                    (wanted is None or _same_listener(_proc_address(fields[1].rsplit(":", 1)[0]), wanted)):
                inodes.add(fields[9])
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    if not read:
        return None
    for descriptor in descriptors:
        try:
            if os.readlink(f"/proc/{pid}/fd/{descriptor}").removeprefix("socket:[").rstrip("]") in inodes:
                return True
        except OSError:
            continue
    return False


def _proc_address(hexadecimal: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as /proc/net/tcp{,6} writes it: 32-bit words in the machine's (little-endian) order, in hex."""
    raw = bytes.fromhex(hexadecimal)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(words)


def _same_listener(listening, wanted) -> bool:
    """Whether a socket listening at address `listening` is in the way of one at `wanted`."""
    mapped = getattr(listening, "ipv4_mapped", None)
    return listening == wanted or listening.is_unspecified or wanted.is_unspecified or mapped == wanted


def check_socket_path(path: Path) -> None:
    """A --socket path the daemon may bind: short enough for a Unix socket, and nothing but a (stale) socket there.
    Its folder is created owner-only when missing; an existing folder is left as it is (the socket itself is 0600)."""
    if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
        raise DaemonError(f"--socket {str(path)!r} is {len(os.fsencode(path))} bytes long; a Unix socket path may "
                          f"have at most {MAX_SOCKET_PATH_BYTES}")
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISSOCK(mode):
        raise DaemonError(f"--socket {str(path)!r} exists and is not a socket; nestling will not replace it")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)


def check_socket_owner(target: str) -> None:
    """Refuse a unix:PATH target whose socket belongs to another user: a client would send it the user's code (a
    missing socket is left to the connection to report)."""
    if not target.startswith("unix:"):
        return
    path = target.removeprefix("unix:")
    try:
        owner = os.stat(path).st_uid
    except OSError:
        return
    if owner != os.getuid():
        raise DaemonError(f"the socket {path} belongs to another user (uid {owner}), not to you; nestling will not "
                          f"send your code there")


def secure_folder(folder: Path) -> None:
    """nestling's own runtime folder: created, or made again, owner-only. Refused when it is a link or belongs to
    someone else (/tmp/nestling-<uid> is a name another local user could take first)."""
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise DaemonError(f"cannot create the runtime folder {folder}: {exc.strerror}") from None
    info = folder.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a folder"
        raise DaemonError(f"the runtime folder {folder} is {what}; nestling keeps its socket only in a folder of its "
                          f"own: remove it, or set XDG_RUNTIME_DIR")
    if info.st_uid != os.getuid():
        raise DaemonError(f"the runtime folder {folder} belongs to another user (uid {info.st_uid}); nestling will not "
                          f"put its socket there: remove it, or set XDG_RUNTIME_DIR")
    os.chmod(folder, 0o700)


def take_lock(socket_path: Path) -> DaemonLock:
    """This user's daemon lock in the runtime folder, naming our pid and `socket_path` (a DaemonError where another
    daemon holds it, or the folder or path is not safe). Light: `serve` takes it before the libraries load, so that
    `serve --stop` and `status` see a daemon that is starting."""
    from ..service.config import runtime_dir

    folder = runtime_dir()
    secure_folder(folder)
    check_socket_path(socket_path)
    lock = DaemonLock(folder)
    lock.acquire(socket_path)
    return lock


def lost_socket(address: str) -> str | None:
    """The socket path of `address` where this user's daemon bound it and it is gone since (a cleaner of /tmp, an `rm`:
    the daemon runs and no client can reach it), else None."""
    from ..service.config import runtime_dir

    path = address.removeprefix("unix:") if address.startswith("unix:") else None
    lock = DaemonLock(runtime_dir())
    if path is None or os.path.exists(path) or lock.socket_named() != path or not lock.listening():
        return None
    try:
        return path if lock.holder() is not None else None  # (a daemon that exited leaves its mark in the file)
    except DaemonError:
        return None


def locked_socket() -> str | None:
    """The socket this user's daemon listens on, as its lock names it (`serve --socket`: not the configured one)."""
    from ..service.config import runtime_dir

    return DaemonLock(runtime_dir()).socket_named()


def running_daemons_socket() -> str | None:
    """locked_socket() while a daemon holds the lock (a lock file left by one that died names no daemon)."""
    from ..service.config import runtime_dir

    lock = DaemonLock(runtime_dir())
    try:
        return lock.socket_named() if lock.holder() is not None else None
    except DaemonError:  # (a daemon starting, that has not written its pid yet: the configured socket, then)
        return None
