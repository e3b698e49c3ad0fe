"""Ctrl-C / SIGTERM during train-head: the first signal only sets a flag, a second acts as usual."""

import os
import signal

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
