"""Ctrl-C / SIGTERM during train-head: the first signal only sets a flag, a second acts as usual."""

import os
import signal

import pytest

from nestling.daemon.training.stopping import StopSignal


def test_the_first_signal_sets_the_flag_and_the_second_reaches_the_previous_handler():
    seen = []
    previous = signal.signal(signal.SIGTERM, lambda number, frame: seen.append(number))
    try:
        with StopSignal() as stop:
            assert not stop
            os.kill(os.getpid(), signal.SIGTERM)
            assert stop and stop.received == signal.SIGTERM and seen == []
            os.kill(os.getpid(), signal.SIGTERM)  # a second one: as without the StopSignal
            assert seen == [signal.SIGTERM]
        os.kill(os.getpid(), signal.SIGTERM)
        assert seen == [signal.SIGTERM, signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_leaving_it_restores_the_handlers_it_replaced():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with StopSignal():
        assert signal.getsignal(signal.SIGINT) != before[0]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_a_second_signal_stops_even_where_the_signal_was_ignored_before(capsys):
    """(A job a script runs in the background inherits SIGINT ignored: the first kill -INT stopped train-head after
    the step in progress, as it should, but the second one was ignored again and it went on evaluating: QA.)"""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with StopSignal() as stop:
            os.kill(os.getpid(), signal.SIGINT)
            assert stop.received == signal.SIGINT
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
                signal.pthread_sigmask(signal.SIG_BLOCK, [])  # (a bytecode boundary for the handler to run at)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        assert "stopping now: what is saved stays" in capsys.readouterr().err  # (QA: it stopped without a word)
    finally:
        signal.signal(signal.SIGINT, previous)
