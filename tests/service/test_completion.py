"""The completion service on a tiny random model: typing into the last completion hints the drafter with its
rest, a prefill ahead prepares the keystroke it guesses, and neither ever changes what is written."""

from dataclasses import replace

import pytest

from cancel_events import CancelAfter
from nestling.daemon.models.target import load_target
from nestling.daemon.policy.cost_model import CostProfile
from nestling.daemon.runtime import Runtime
from nestling.daemon.service.completion import (CompletionItem, CompletionRequest, CompletionResult, CompletionService,
                                                PrefillRequest, predicted_keystroke)
from nestling.daemon.service.config import ServiceConfig
from nestling.daemon.speculative.drafter import TreeBudget
from tiny import informed_head, save_split_character_model, save_tiny_model_folder

PROFILE = CostProfile("t", 300, {1: 100.0, 16: 110.0, 128: 500.0}, 10.0)
DOCUMENT = "def total(values):\n    result = 0\n    for value in values:\n        result = "
URI = "file:///work/total.py"


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    folder = save_tiny_model_folder(tmp_path_factory.mktemp("tiny"), never_stop=True, whole_characters=True)
    target = load_target(str(folder), device="cpu", dtype="float32", progress=False)
    return Runtime(target=target, head=informed_head(target), head_source="test", budget=TreeBudget(4, 4, 12),
                   _profile=PROFILE)


def type_into_last_completion(runtime, follow: bool, typed_chars: int):
    """Ask at the end of DOCUMENT, type the first `typed_chars` of what the model wrote, ask again."""
    service = CompletionService(runtime, ServiceConfig(max_tokens=24, follow_last_completion=follow))
    service.complete(CompletionRequest(uri=URI, text=DOCUMENT, cursor=len(DOCUMENT), line_mode="single"))
    written = service.sessions.get(URI).recent_completions[-1].text
    assert len(written) > typed_chars
    document = DOCUMENT + written[:typed_chars]
    again = service.complete(CompletionRequest(uri=URI, text=document, cursor=len(document), line_mode="single"))
    return written, again


def test_asking_again_at_the_same_place_drafts_the_whole_last_completion(runtime):
    written, hinted = type_into_last_completion(runtime, True, 0)
    _, plain = type_into_last_completion(runtime, False, 0)
    assert [item.text for item in hinted.items] == [item.text for item in plain.items] != []
    assert hinted.stats.tau > plain.stats.tau and hinted.stats.tau >= 8


def test_typing_into_the_last_completion_drafts_its_rest_and_writes_the_same(runtime):
    """Typing part of what the model wrote changes the tokens it sees, and a tiny random model then soon writes
    something else; the hint still pays where it keeps to its text. The output is always the output without it."""
    taus = []
    for typed_chars in range(1, 13):
        _, hinted = type_into_last_completion(runtime, True, typed_chars)
        _, plain = type_into_last_completion(runtime, False, typed_chars)
        assert [item.text for item in hinted.items] == [item.text for item in plain.items] != []
        taus.append((hinted.stats.tau, plain.stats.tau))
    assert sum(hinted > plain for hinted, plain in taus) >= 3
    assert sum(hinted for hinted, _ in taus) > sum(plain for _, plain in taus)


@pytest.mark.parametrize("shown, typed", [("x + 1", "x"), ("\n    return x", "\n    "), ("\n\treturn", "\n\t"),
                                          ("\n\n    y", "\n"), ("\n", "\n"), (" ", " ")])
def test_the_keystroke_guessed_from_the_ghost_text(shown, typed):
    assert predicted_keystroke(shown) == typed


def ask_type_and_ask(runtime, ahead: bool, keystroke: str | None, accept: bool = False):
    """Ask at the end of DOCUMENT; prefill ahead if `ahead` (both guesses); type `keystroke` (None: the guessed one),
    or accept the completion whole; ask again."""
    service = CompletionService(runtime, ServiceConfig(max_tokens=24, prefill_ahead=ahead))
    request = CompletionRequest(uri=URI, text=DOCUMENT, cursor=len(DOCUMENT), line_mode="single")
    first = service.complete(request)
    shown = first.items[0].text
    guesses = service.prefill_ahead_requests(request, first)
    if ahead:
        assert [(g.ahead, g.text) for g in guesses] == [(1, DOCUMENT + predicted_keystroke(shown)),
                                                        (2, DOCUMENT + shown)]
        assert all(service.prefill(guess).complete for guess in guesses)
    else:
        assert guesses == []
    typed = shown if accept else keystroke if keystroke is not None else predicted_keystroke(shown)
    document = DOCUMENT + typed
    return service.complete(CompletionRequest(uri=URI, text=document, cursor=len(document), line_mode="single"))


@pytest.mark.parametrize("keystroke, accept", [(None, False), (None, True), ("#", False), ("(", False)])
def test_prefills_ahead_prepare_the_guessed_requests_and_never_change_a_completion(runtime, keystroke, accept):
    ahead = ask_type_and_ask(runtime, True, keystroke, accept)
    plain = ask_type_and_ask(runtime, False, keystroke, accept)
    assert [item.text for item in ahead.items] == [item.text for item in plain.items]
    guessed = keystroke is None
    assert ahead.stats.prepared_ahead == guessed and not plain.stats.prepared_ahead
    if guessed:  # only the prompt's last token is run again (for its logits)
        assert ahead.stats.reused_prefix_tokens == ahead.stats.prompt_tokens - 1
        assert plain.stats.reused_prefix_tokens < ahead.stats.reused_prefix_tokens


def test_the_spare_state_is_swapped_in_only_when_it_shares_more(runtime):
    service = CompletionService(runtime, ServiceConfig(max_tokens=24))
    request = CompletionRequest(uri=URI, text=DOCUMENT, cursor=len(DOCUMENT), line_mode="single")
    first = service.complete(request)
    typing, accepting = service.prefill_ahead_requests(request, first)
    typed, accepted = service.prefill(typing), service.prefill(accepting)
    # the spare starts as a branch of the state at the cursor: only what follows it is computed
    assert typed.complete and accepted.complete and 0 < accepted.prefilled_tokens < accepted.prompt_tokens / 2
    session = service.sessions.get(URI)
    kept, spare = session.states["spec"], session.spare_states["spec"]
    again = service.complete(replace(request, text=typing.text, cursor=typing.cursor))  # the first guess was right
    assert again.stats.prepared_ahead and session.states["spec"] is kept and session.spare_states["spec"] is spare
    service.prefill(accepting)  # the second guess again (into the spare), then accepted
    accepted = service.complete(replace(request, text=accepting.text, cursor=accepting.cursor))
    assert accepted.stats.prepared_ahead and session.states["spec"] is spare and session.spare_states["spec"] is kept
    assert session.kv_bytes() == kept.kv_bytes() + spare.kv_bytes()


def test_a_file_open_prefill_is_paced_in_time_unless_a_chunk_length_is_set(runtime):
    long_document = DOCUMENT * 12
    paced = CompletionService(runtime, ServiceConfig(max_tokens=24))
    assert paced.prefill_pace.chunk_ms == 350 and paced.prefill_pace.next_tokens() == 64
    result = paced.prefill(PrefillRequest(uri=URI, text=long_document, cursor=len(long_document)))
    assert result.complete and result.prefilled_tokens > 64
    assert paced.prefill_pace.scale > 0  # its chunks were timed: the next one is sized from them
    fixed = CompletionService(runtime, ServiceConfig(max_tokens=24, prefill_chunk_tokens=48))
    assert fixed.prefill_pace.chunk_ms is None
    assert fixed.prefill(PrefillRequest(uri=URI, text=long_document, cursor=len(long_document))).complete
    assert fixed.prefill_pace.next_tokens() == 48


def test_no_prefill_ahead_without_a_completion_or_for_plain_requests(runtime):
    service = CompletionService(runtime, ServiceConfig(max_tokens=24))
    request = CompletionRequest(uri=URI, text=DOCUMENT, cursor=len(DOCUMENT), line_mode="single")
    assert service.prefill_ahead_requests(request, CompletionResult()) == []
    shown = CompletionResult([CompletionItem("x", len(DOCUMENT), len(DOCUMENT))])
    assert [g.text for g in service.prefill_ahead_requests(request, shown)] == [DOCUMENT + "x"]  # one guess: both same
    assert service.prefill_ahead_requests(replace(request, mode="ar"), shown) == []
    off = CompletionService(runtime, ServiceConfig(max_tokens=24, prefill_ahead=False))
    assert off.prefill_ahead_requests(request, shown) == []


def test_the_guess_that_was_right_last_time_is_prefilled_first(runtime):
    service = CompletionService(runtime, ServiceConfig(max_tokens=24))
    request = CompletionRequest(uri=URI, text=DOCUMENT, cursor=len(DOCUMENT), line_mode="single")
    result, orders = service.complete(request), []
    for accept in (False, True, True, False):  # the user types, accepts, accepts, types
        guesses = service.prefill_ahead_requests(request, result)
        shown = result.items[0].text
        accepting = [g for g in guesses if g.text == request.text + shown]
        assert len(guesses) == 2 and len(accepting) == 1
        orders.append("accept first" if guesses[0] is accepting[0] else "typing first")
        assert all(service.prefill(guess).complete for guess in guesses)
        done = accepting[0] if accept else next(g for g in guesses if g is not accepting[0])
        request = replace(request, text=done.text, cursor=done.cursor)
        result = service.complete(request)
        assert result.stats.prepared_ahead  # whichever guess was right, it was ready
    assert orders == ["typing first", "typing first", "accept first", "accept first"]


def test_further_alternatives_seed_past_the_largest_seed_by_wrapping():
    request = CompletionRequest(uri="file:///s.py", text="x", cursor=1, temperature=0.5, seed=2**64 - 1)
    seeds = [CompletionService._sampling(request, i).seed for i in range(3)]
    assert seeds == [2**64 - 1, 0, 1]


def test_alternatives_are_distinct_samples_after_the_greedy_completion(runtime):
    service = CompletionService(runtime, ServiceConfig(max_tokens=16))
    ask = dict(text=DOCUMENT, cursor=len(DOCUMENT), line_mode="multi")
    greedy = service.complete(CompletionRequest(uri="file:///one.py", **ask))
    three = service.complete(CompletionRequest(uri="file:///three.py", alternatives=3, seed=7, **ask))
    texts = [item.text for item in three.items]
    assert texts[0] == greedy.items[0].text  # the first is what the model writes greedily
    assert len(texts) >= 2 and len(set(texts)) == len(texts)  # the others are samples, duplicates dropped
    ar = dict(alternatives=3, seed=7, mode="ar", **ask)  # a seed decides the samples, speculative or not
    assert [i.text for i in service.complete(CompletionRequest(uri="file:///ar.py", **ar)).items] == texts
    again = service.complete(CompletionRequest(uri="file:///three-again.py", alternatives=3, seed=7, **ask))
    assert [item.text for item in again.items] == texts


def test_a_long_new_prompt_is_prefilled_in_chunks_a_cancel_stops_and_the_next_request_reuses(runtime):
    from nestling.daemon.service.completion import Superseded

    document = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(40))
    ask = CompletionRequest(uri=URI, text=document, cursor=len(document), line_mode="single")
    config = ServiceConfig(max_tokens=12, prefill_chunk_tokens=32)
    plain = CompletionService(runtime, config).complete(ask)  # no cancel event: one forward over the prompt
    assert plain.stats.prompt_tokens > 4 * 32
    service = CompletionService(runtime, config)
    with pytest.raises(Superseded):
        service.complete(ask, cancel=CancelAfter(4))
    kept = len(service.sessions.get(URI).states["spec"].tokens)
    assert 32 <= kept < plain.stats.prompt_tokens - 32  # stopped between chunks, keeping what was done
    resumed = service.complete(ask, cancel=CancelAfter(10**6))
    assert resumed.stats.reused_prefix_tokens == kept
    assert [item.text for item in resumed.items] == [item.text for item in plain.items] != []
    assert resumed.stats.time_to_first_token_ms > 0 and resumed.stats.prompt_tokens == plain.stats.prompt_tokens


@pytest.mark.parametrize("line_break", ["\r", "\r\n"])
@pytest.mark.parametrize("line_mode", ["auto", "multi"])
def test_a_document_with_other_line_breaks_completes_as_the_same_with_line_feeds_given_back_in_its_own(
        runtime, line_break, line_mode):
    """The model reads every document with line feeds (it wrote other code after CRLF: `    def ¦` gave "def
    pop(self):" in a CRLF file, "pop(self):" in the LF one); the completion comes back with the document's breaks."""
    service = CompletionService(runtime, ServiceConfig(max_tokens=24))
    texts = (DOCUMENT + "\n\nprint(total([1]))\n", (DOCUMENT + "\n\nprint(total([1]))\n").replace("\n", line_break))
    cursors = (len(DOCUMENT), len(DOCUMENT.replace("\n", line_break)))
    results = [service.complete(CompletionRequest(uri=f"{URI}{n}", text=text, cursor=cursor, line_mode=line_mode))
               for n, (text, cursor) in enumerate(zip(texts, cursors))]
    lf, other = results
    assert [i.text.replace("\n", line_break) for i in lf.items] == [i.text for i in other.items] != []
    assert [(i.replace_start, i.replace_end) for i in other.items] == [(cursors[1], cursors[1])]  # its own offsets
    assert (lf.stats.region, lf.stats.prompt_tokens) == (other.stats.region, other.stats.prompt_tokens)
    crlf = DOCUMENT.replace("\n", "\r\n")
    before = service.complete(CompletionRequest(uri=URI + "x", text=crlf + "\r\n", cursor=len(crlf)))
    between = service.complete(CompletionRequest(uri=URI + "x", text=crlf + "\r\n", cursor=len(crlf) + 1))
    parts = service.complete(CompletionRequest(uri=URI + "y", prefix=crlf + "\r", suffix="\n"))
    for result in (between, parts):  # a cursor between CR and LF is read as before the CR, and the completion goes
        # there (QA: `replaces` at the cursor split the line break)
        assert [(i.text, i.replace_start, i.replace_end) for i in result.items] == \
            [(i.text, len(crlf), len(crlf)) for i in before.items] != []


def test_the_prompt_is_given_the_documents_file_name_or_its_languages(runtime, monkeypatch):
    """(the prompt names the file where the document is too short to tell its language: context/fim.py)"""
    from nestling.daemon.service import completion

    names = []
    build = completion.build_fim_prompt
    monkeypatch.setattr(completion, "build_fim_prompt", lambda *args, path=None, **kwargs: (
        names.append(path), build(*args, path=path, **kwargs))[1])
    service = CompletionService(runtime, ServiceConfig(max_tokens=4))
    service.complete(CompletionRequest(uri="untitled:Untitled-1", language_id="go", text="", cursor=0))
    service.complete(CompletionRequest(uri="file:///src/my%20app/main.rs", language_id="rust", text="fn", cursor=2))
    service.prefill(PrefillRequest(uri="untitled:Untitled-2", language_id="python", text="", cursor=0))
    assert names == ["untitled.go", "main.rs", "untitled.py"]


def test_two_clients_with_the_same_document_keep_sessions_of_their_own(runtime):
    from nestling.daemon.service.completion import session_key

    service = CompletionService(runtime, ServiceConfig(max_tokens=6))
    a = CompletionRequest(uri=URI, client="editor A", text=DOCUMENT, cursor=len(DOCUMENT), line_mode="single")
    other_text = "def mean(xs):\n    return "
    b = CompletionRequest(uri=URI, client="editor B", text=other_text, cursor=len(other_text), line_mode="single")
    first = service.complete(a)
    service.complete(b)
    again = service.complete(a)  # editor B's request did not take editor A's model state
    assert again.stats.reused_prefix_tokens >= again.stats.prompt_tokens - 1  # (shared, it reused a few tokens)
    assert [i.text for i in again.items] == [i.text for i in first.items]
    assert len({session_key(a), session_key(b), URI}) == 3


@pytest.mark.parametrize("max_tokens", [1, 2, 5, 8])
def test_a_character_split_across_tokens_is_streamed_and_offered_only_whole(tmp_path, max_tokens):
    """(QA: a character written as two byte tokens was streamed as U+FFFD and never corrected; cut by max_tokens after
    its first byte, it was offered as U+FFFD, which accepting wrote into the file.)"""
    folder = save_split_character_model(tmp_path)
    target = load_target(str(folder), device="cpu", dtype="float32", progress=False)
    service = CompletionService(Runtime(target=target, head=informed_head(target), head_source="test",
                                        budget=TreeBudget(4, 4, 12), _profile=PROFILE), ServiceConfig())
    chunks = []
    result = service.complete(CompletionRequest(uri=URI, text='x = "', cursor=5, max_tokens=max_tokens),
                              on_text=chunks.append)
    assert result.stats.tokens == max_tokens  # (an odd number: the last character half written)
    assert "".join(chunks) == "é" * (max_tokens // 2) and "\ufffd" not in "".join(chunks)
    assert [item.text for item in result.items] == (["é" * (max_tokens // 2)] if max_tokens > 1 else [])


def test_the_stats_name_the_mode_the_daemon_decoded_with(runtime):
    """(A request's "spec" runs the daemon's --mode, lookup say; its stats said "spec".)"""
    service = CompletionService(runtime, ServiceConfig(max_tokens=4, mode="lookup"))
    request = CompletionRequest(uri=URI, text=DOCUMENT, cursor=len(DOCUMENT), line_mode="single")
    assert service.complete(request).stats.mode == "lookup"
    assert service.complete(CompletionRequest(uri=URI, text=DOCUMENT, cursor=len(DOCUMENT), mode="ar")).stats.mode == "ar"


def test_prompts_and_completions_keep_within_the_models_positions(runtime, monkeypatch, caplog):
    """(Nothing checked the model's context: a tiny model of 64 positions got 1,009-token prompts and completions
    running past them.)"""
    from nestling.daemon.service.completion import fitted_budget

    assert fitted_budget(ServiceConfig(), None).prefix_tokens == ServiceConfig().prefix_tokens  # (no limit said)
    budget = fitted_budget(ServiceConfig(prefix_tokens=1536, suffix_tokens=64), 512)
    assert budget.prefix_tokens + budget.suffix_tokens + 32 <= 512 and budget.suffix_tokens == 64
    assert "too little room to write" in caplog.text
    monkeypatch.setattr(type(runtime.target), "positions", property(lambda self: 160))
    service = CompletionService(runtime, ServiceConfig(max_tokens=200, max_tokens_limit=1024))
    long = DOCUMENT + "".join(f"    result = result + values[{i}]\n" for i in range(60)) + "    return "
    result = service.complete(CompletionRequest(uri=URI, text=long, cursor=len(long), line_mode="multi"))
    assert result.stats.prompt_tokens + result.stats.tokens <= 160, result.stats
