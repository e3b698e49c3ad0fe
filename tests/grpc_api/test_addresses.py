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


def test_our_listener_at_another_address_of_the_port_does_not_free_it():
    """(review: the daemon on 127.0.0.2:P and another program on 127.0.0.1:P read as "the daemon holds it", and a
    restart onto 127.0.0.1:P stopped the daemon, then could not listen.)"""
    with socket.socket() as ours:
        ours.bind(("127.0.0.2", 0))
        ours.listen()
        port = ours.getsockname()[1]
        other = subprocess.Popen([sys.executable, "-c", "import socket, sys, time; s = socket.socket(); "
                                  f"s.bind(('127.0.0.1', {port})); s.listen(); print(flush=True); time.sleep(30)"],
                                 stdout=subprocess.PIPE)
        try:
            other.stdout.readline()  # (it listens)
            assert listens_on(os.getpid(), port, "127.0.0.2") is True
            assert listens_on(os.getpid(), port, "127.0.0.1") is False
            assert "in use" in tcp_listen_problem("127.0.0.1", port, holder=os.getpid())
            assert listens_on(other.pid, port, "127.0.0.1") is True and listens_on(other.pid, port, "::1") is False
        finally:
            other.kill()
            other.wait()
    with socket.socket(socket.AF_INET6) as anywhere:  # a wildcard listener is in the way of every address
        anywhere.bind(("::", 0))
        anywhere.listen()
        assert listens_on(os.getpid(), anywhere.getsockname()[1], "127.0.0.1") is True
