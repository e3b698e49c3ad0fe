"""Whether a --tcp port can be listened on, and by whom it is taken (checked before `serve --restart` stops a daemon)."""

import os
import socket
import subprocess
import sys
from pathlib import Path

from nestling.daemon.grpc_api.addresses import listens_on, tcp_listen_problem


def listening() -> socket.socket:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    return taken


def test_a_port_another_process_listens_on_is_a_problem_and_ours_is_not():
    with listening() as taken:
        port = taken.getsockname()[1]
        assert listens_on(os.getpid(), port) is True
        other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            assert listens_on(other.pid, port) is False
            assert "in use" in tcp_listen_problem("127.0.0.1", port, holder=other.pid)
        finally:
            other.kill()
            other.wait()
        assert "in use" in tcp_listen_problem("127.0.0.1", port)
        assert tcp_listen_problem("127.0.0.1", port, holder=os.getpid()) is None  # (a restart frees it)
    assert tcp_listen_problem("127.0.0.1", port) is None  # closed: free again
    assert listens_on(os.getpid(), port) is False


def test_an_address_of_no_local_interface_is_a_problem():
    problem = tcp_listen_problem("192.0.2.1", 7878)  # (TEST-NET-1: no interface of this machine has it)
    assert problem and "assign" in problem.lower()


def test_a_privileged_port_is_a_problem_unless_this_user_may_listen_there():
    first_unprivileged = int(Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").read_text())
    problem = tcp_listen_problem("127.0.0.1", 1)
    if os.geteuid() == 0 or first_unprivileged <= 1:
        assert problem is None
    else:
        assert problem and "permission" in problem.lower()
