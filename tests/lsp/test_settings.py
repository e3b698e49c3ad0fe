"""Language server settings: parsed from initializationOptions / didChangeConfiguration, bad values reported."""

from nestling.lsp.settings import Settings, merge


def test_prefill_on_open_is_on_by_default_and_can_be_turned_off():
    assert Settings().prefill_on_open
    assert not merge(Settings(), {"nestling": {"prefillOnOpen": False}}).prefill_on_open
    assert not merge(Settings(), {"prefillOnOpen": False}).prefill_on_open  # the wrapper is optional


def test_bad_values_are_ignored_and_listed():
    merged = merge(Settings(), {"prefillOnOpen": "no", "maxTokens": 0, "lineMode": "multi"})
    assert merged.prefill_on_open and merged.max_tokens == Settings().max_tokens and merged.line_mode == "multi"
    assert set(merged.problems) == {"prefillOnOpen='no'", "maxTokens=0"}


def test_problems_are_those_of_the_latest_settings_only():
    bad = merge(Settings(), {"maxTokens": 0, "lineMode": "multi"})
    for later in (None, {"nestling": None}, {"alternatives": 2}):  # (a client may send null settings on each change)
        merged = merge(bad, later)
        assert merged.problems == () and merged.line_mode == "multi"


def test_a_daemon_tcp_setting_that_is_no_address_is_a_problem_not_a_target():
    merged = merge(Settings(), {"daemon": {"tcp": "notaport"}})
    assert merged.tcp is None and merged.problems == ("daemon.tcp='notaport' (expected HOST:PORT with a port in "
                                                      "1..65535, e.g. 127.0.0.1:7878)",)
    assert merge(Settings(), {"daemon": {"tcp": "127.0.0.1:7878"}}).tcp == "127.0.0.1:7878"
    assert merge(Settings(), {"daemon": {"tcp": None}}).problems == ()


def test_unknown_keys_in_the_nestling_object_are_listed_with_what_they_may_mean():
    merged = merge(Settings(), {"nestling": {"maxtokens": 16, "frobnicate": 1, "lineMode": "single",
                                             "daemon": {"autostart": False, "socket": "/tmp/d.sock"}}})
    assert merged.max_tokens == Settings().max_tokens and merged.line_mode == "single" and merged.auto_start
    assert merged.problems == ("maxtokens (unknown: maxTokens?)", "frobnicate (unknown)",
                               "daemon.autostart (unknown: daemon.autoStart?)")
    guesses = merge(Settings(), {"nestling": {"daemon": {"host": "x", "port": 1, "sockett": "/s"}}}).problems
    assert guesses == ("daemon.host (unknown)", "daemon.port (unknown)", "daemon.sockett (unknown: daemon.socket?)")
    # without the wrapper the object may be all of a client's settings: other keys are not ours to judge
    assert merge(Settings(), {"editor.fontSize": 12, "maxTokens": 16}).problems == ()
