"""The ``llama-server`` and ``openai`` engines (``fim.servers``) against a scripted peer that
speaks llama-server's native and OpenAI-compatible APIs over real sockets
(``tests/support/llama_peer.py``): exactness by verify-and-repair, and every failure a user
meets giving one clear error, no hang, and no API key in a message or a log."""

from __future__ import annotations

import ast
import logging
import socket
import threading
import time

import pytest

from fim.options import Mode, StopReason
from fim.request import CompletionRequest
from fim.servers.engine import ServerOptions, connect
from fim.servers.errors import ServerError
from tests.support.llama_peer import STOP, Behaviour, LlamaPeer

LEFT, RIGHT = "x = ", "\nprint(x)\n"
ENGINES = ("llama-server", "openai")


def _engine(kind: str, peer: LlamaPeer, **options):
    # The scripted model speaks the santacoder template; its name says qwen, so the openai
    # route is told the template, as a user of such a server would set it.
    if kind == "openai":
        options.setdefault("template", "santacoder")
    return connect(kind, ServerOptions(peer.url, **options))


@pytest.fixture
def peer():
    with LlamaPeer("1 + 2", left=LEFT) as p:
        yield p


def _req(**kw) -> CompletionRequest:
    return CompletionRequest(LEFT, RIGHT, max_tokens=kw.pop("max_tokens", 16), **kw)


@pytest.mark.parametrize("kind", ENGINES)
def test_the_servers_middle_is_taken_in_one_round_trip(peer, kind):
    engine = _engine(kind, peer)
    res = engine.complete(_req())
    assert (res.middle, res.stop, res.parses) == ("1 + 2", StopReason.EOS, True)
    assert engine.last_stats.round_trips == 1 and engine.last_stats.repairs == 0
    # The server was asked for the top-N and not to stop on its own (the constraint decides).
    body = peer.log.completions[-1]
    assert body["ignore_eos"] is True
    assert body.get("n_probs", body.get("logprobs")) == 10


@pytest.mark.parametrize("kind", ENGINES)
def test_a_refused_token_is_repaired_with_the_next_viable_one(peer, kind):
    # The model's favourite after "1 " closes a bracket never opened: the constraint refuses
    # it, the loop takes "+" (the likeliest viable one) and asks again from there.
    peer.overrides["1 "] = [(")", -0.2), ("+", -0.9), (STOP, -3.0)]
    engine = _engine(kind, peer)
    res = engine.complete(_req())
    assert res.middle == "1 + 2" and res.parses
    assert engine.last_stats.round_trips == 2 and engine.last_stats.repairs == 1
    first, repair = peer.log.completions[-2:]
    if kind == "llama-server":  # the continuation is the prompt plus the ids taken
        assert repair["prompt"][:len(first["prompt"])] == first["prompt"]
        tail = repair["prompt"][len(first["prompt"]):]
        assert "".join(chr(t - 1000) for t in tail) == " 1 +"  # healed " " re-typed
    else:
        assert repair["prompt"] == first["prompt"] + "1 +"
    assert repair.get("n_predict", repair.get("max_tokens")) < first.get(
        "n_predict", first.get("max_tokens"))


@pytest.mark.parametrize("kind", ENGINES)
def test_unconstrained_takes_the_servers_favourite(peer, kind):
    peer.overrides["1 "] = [(")", -0.2), ("+", -0.9), (STOP, -3.0)]
    engine = _engine(kind, peer)
    res = engine.complete(_req(mode=Mode.UNCONSTRAINED, max_tokens=4))
    assert res.raw.startswith("1 )") and engine.last_stats.repairs == 0


@pytest.mark.parametrize("kind", ENGINES)
def test_no_viable_token_ends_at_the_best_complete_point(peer, kind):
    peer.overrides["1 +"] = [(")", -0.1), ("]", -0.5)]  # nothing viable, no stop offered
    res = _engine(kind, peer).complete(_req())
    assert res.middle.strip() == "1" and res.stop is StopReason.BEST_COMPLETE
    ast.parse(LEFT + res.middle + RIGHT)


@pytest.mark.parametrize("kind", ENGINES)
def test_no_viable_token_and_no_complete_point_gives_no_suggestion(peer, kind):
    peer.overrides[""] = [(")", -0.1), ("]", -0.5), (STOP, -0.7)]  # "x = " cannot end
    res = _engine(kind, peer).complete(_req())
    assert res.middle is None and res.stop is StopReason.NO_CANDIDATE


@pytest.mark.parametrize("kind", ENGINES)
def test_out_of_budget_without_a_stop_in_the_top_n_ends_at_a_complete_point(kind):
    # The model never offers to stop: the places where the middle may end are still ranked
    # (a stop outside the top-N is below the N-th), so the budget's end finds one.
    with LlamaPeer("1 + 2 + 3 + 4 + 5 + 6", left=LEFT) as p:
        p.hide_stop = True
        res = _engine(kind, p).complete(_req(max_tokens=6))
    assert res.stop is StopReason.BEST_COMPLETE and res.middle and res.parses
    ast.parse(LEFT + res.middle + RIGHT)


@pytest.mark.parametrize("kind", ENGINES)
def test_a_stop_where_the_file_is_incomplete_is_not_taken(peer, kind):
    peer.overrides["1 +"] = [(STOP, -0.1), (" ", -0.9)]
    res = _engine(kind, peer).complete(_req())
    assert res.middle == "1 + 2" and res.parses


def test_the_window_and_template_come_from_the_server(peer):
    engine = _engine("llama-server", peer)
    assert engine.window == 2048 and engine.template.name == "santacoder"
    assert engine.runtime.device == "remote" and "healing on" in engine.runtime.description
    assert engine.features.exact_tokens
    openai = _engine("openai", peer)
    assert not openai.features.exact_tokens
    assert "no token healing" in openai.runtime.description


def test_the_openai_template_comes_from_the_model_name(peer):
    from fim.servers.openai_route import template_for

    assert template_for("Qwen2.5-Coder-7B-Instruct-GGUF", None).name == "qwen2.5-coder"
    assert template_for("qwen", "starcoder").name == "starcoder"
    with pytest.raises(ServerError, match="no known fill-in-the-middle template"):
        template_for("llama3", None)


# ----- failures a user meets --------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("kind", ENGINES)
def test_a_server_that_is_down_is_one_clear_line(kind):
    with pytest.raises(ServerError) as err:
        connect(kind, ServerOptions(f"http://127.0.0.1:{_closed_port()}"))
    assert "cannot be reached" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("kind", ENGINES)
def test_a_proxy_before_a_server_that_is_gone(peer, kind):
    peer.behaviour = Behaviour.DOWN_HTML
    with pytest.raises(ServerError, match="HTTP 502"):
        _engine(kind, peer)


@pytest.mark.parametrize("url", ["", "localhost:8080", "ftp://x"])
def test_bad_urls(url):
    with pytest.raises(ServerError):
        connect("llama-server", ServerOptions(url))


@pytest.mark.parametrize("kind", ENGINES)
def test_http_errors_on_a_completion(peer, kind):
    engine = _engine(kind, peer)
    peer.behaviour = Behaviour.HTTP_500
    with pytest.raises(ServerError, match="HTTP 500: slot unavailable"):
        engine.complete(_req())
    peer.behaviour = Behaviour.LLAMA  # the server recovers: so does the engine
    assert engine.complete(_req()).middle == "1 + 2"


@pytest.mark.parametrize("kind", ENGINES)
def test_a_server_without_log_probabilities_cannot_constrain(peer, kind):
    engine = _engine(kind, peer)
    peer.behaviour = Behaviour.NO_PROBS
    with pytest.raises(ServerError, match="Seam cannot constrain this server"):
        engine.complete(_req())


def test_without_log_probabilities_unconstrained_still_runs(peer):
    engine = _engine("openai", peer)
    peer.behaviour = Behaviour.NO_PROBS
    res = engine.complete(_req(mode=Mode.UNCONSTRAINED))
    assert res.raw.startswith("1 + 2") and res.decoding is Mode.UNCONSTRAINED


@pytest.mark.parametrize("kind", ENGINES)
def test_a_stream_cut_inside_an_event(peer, kind):
    engine = _engine(kind, peer)
    peer.behaviour = Behaviour.CUT
    with pytest.raises(ServerError, match="cut|broke off|malformed"):
        engine.complete(_req())


@pytest.mark.parametrize("kind", ENGINES)
def test_a_model_without_fim_tokens(peer, kind):
    peer.behaviour = Behaviour.NO_FIM
    if kind == "openai":
        peer_model = "llama-3-8b-instruct"
        with pytest.raises(ServerError, match="no known fill-in-the-middle template"):
            connect(kind, ServerOptions(peer.url, model=peer_model))
    else:
        with pytest.raises(ServerError, match="no known fill-in-the-middle tokens"):
            connect(kind, ServerOptions(peer.url))


@pytest.mark.parametrize("kind", ENGINES)
def test_a_slow_server_meets_the_time_budget_and_cancel(peer, kind):
    engine = _engine(kind, peer)
    peer.behaviour, peer.delay_s = Behaviour.SLOW, 3.0
    t0 = time.monotonic()
    res = engine.complete(_req(time_budget_ms=200))
    assert res.stop is StopReason.TIME and res.middle is None
    assert time.monotonic() - t0 < 2.0
    flag = threading.Event()
    threading.Timer(0.2, flag.set).start()
    t0 = time.monotonic()
    res = engine.complete(_req(), cancel=flag.is_set)
    assert res.stop is StopReason.CANCELLED and time.monotonic() - t0 < 2.0


@pytest.mark.parametrize("kind", ENGINES)
def test_a_wrong_api_key_is_said_and_never_written(kind, caplog):
    secret = "sk-seam-test-0123456789"
    with LlamaPeer("1 + 2", left=LEFT, api_key="right-key") as p, \
            caplog.at_level(logging.DEBUG):
        with pytest.raises(ServerError) as err:
            connect(kind, ServerOptions(p.url, api_key=secret, template="santacoder"))
        assert "HTTP 401" in str(err.value) and "Invalid API Key" in str(err.value)
        assert secret not in str(err.value)
        engine = connect(kind, ServerOptions(p.url, api_key="right-key",
                                             template="santacoder"))
        assert engine.complete(_req()).middle == "1 + 2"
        assert p.log.auth[-1] == "Bearer right-key"
    assert secret not in caplog.text and "right-key" not in caplog.text


def test_a_key_echoed_by_the_server_is_blanked():
    from fim.servers.errors import redact

    assert redact("bad key sk-abcdef given", "sk-abcdef") == "bad key *** given"


# ----- the command line ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ENGINES)
def test_seam_complete_on_a_server(peer, kind, tmp_path, capsys, monkeypatch):
    from fim.cli import main

    src = tmp_path / "a.py"
    src.write_text(LEFT + RIGHT)
    monkeypatch.setenv("SEAM_SERVER_API_KEY", "sk-cli-secret-key")
    extra = ["--template", "santacoder"] if kind == "openai" else []
    code = main(["complete", f"{src}:1:5", "--engine", kind, "--server", peer.url,
                 "--quiet", *extra])
    out = capsys.readouterr()
    assert code == 0 and out.out == "1 + 2\n"
    assert peer.log.auth[-1] == "Bearer sk-cli-secret-key"


def test_seam_complete_with_a_server_that_is_down(tmp_path, capsys, monkeypatch):
    from fim.cli import main

    src = tmp_path / "a.py"
    src.write_text(LEFT + RIGHT)
    monkeypatch.setenv("SEAM_SERVER_API_KEY", "sk-cli-secret-key")
    code = main(["complete", f"{src}:1:5", "--engine", "llama-server", "--server",
                 f"http://127.0.0.1:{_closed_port()}", "--quiet"])
    err = capsys.readouterr().err
    assert code != 0 and "cannot be reached" in err and err.count("\n") == 1
    assert "sk-cli-secret-key" not in err and "Traceback" not in err


@pytest.mark.parametrize("kind", ENGINES)
def test_the_engines_implement_the_engine_interface_and_warm_the_servers_cache(peer, kind):
    from fim.engine_interface import CompletionEngine

    engine = _engine(kind, peer)
    assert isinstance(engine, CompletionEngine)
    assert not engine.features.ranks_alternatives
    req = _req()
    prompt = engine.prompt_for(req)
    assert engine.uncached(req, prompt) == len(prompt.ids)  # nothing sent yet
    sent = len(peer.log.completions)
    assert engine.warm(req, prompt=prompt)
    assert len(peer.log.completions) == sent + 1
    assert engine.uncached(req, prompt) == 0  # the server's slot holds the prompt now
    assert engine.complete(req, prompt=prompt).middle == "1 + 2"
    assert engine.check(5.0) < 5.0
