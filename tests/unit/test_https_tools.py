"""nginx configuration and error log, wrk's done() block, kTLS evidence: pure, on recorded outputs."""

import shutil
import subprocess

import pytest

from conftest import fixture_text
from nicbench.core.errors import InputError, ToolError
from nicbench.plan import parse_plan
from nicbench.plan.studies import SCHEMAS
from nicbench.tools import ktls, nginx, wrk


def test_wrk_result_from_the_done_hook():
    r = wrk.parse(fixture_text("wrk", "4.1.0", "https_ok.txt"))
    assert r.requests == 38 and r.bytes == 2710808292 and r.duration_s == pytest.approx(2.013304)
    assert r.socket_errors == 0 and r.bad_status == 0
    assert r.gbps == pytest.approx(2710808292 * 8 / 2.013304 / 1e9)
    assert r.percentiles_us["99"] == 518629 and r.latency_us["mean"] == pytest.approx(195072.4)


def test_wrk_counts_error_responses_separately():
    r = wrk.parse(fixture_text("wrk", "4.1.0", "http_404.txt"))
    assert r.bad_status == r.requests == 14897 and r.socket_errors == 0


def test_wrk_that_never_ran_is_a_tool_error_with_its_words():
    with pytest.raises(ToolError) as e:
        wrk.parse("", fixture_text("wrk", "4.1.0", "connect_refused.txt"))
    assert "unable to connect" in e.value.one_line() and "nginx" in e.value.one_line()


def test_wrk_argv_wants_whole_seconds():
    a = wrk.client_argv("https://198.18.0.1:443/payload.bin", script="/tmp/x.lua", threads=2, connections=8,
                        duration=5, timeout=10)
    assert a[:9] == ["wrk", "-t", "2", "-c", "8", "-d", "5s", "--timeout", "10s"] and a[-1].endswith("payload.bin")
    assert a[a.index("-s") + 1] == "/tmp/x.lua"
    assert "done = function(summary, latency, requests)" in wrk.lua_text()


def test_nginx_error_lines_recorded():
    assert nginx.first_error(fixture_text("nginx", "1.22.1", "stderr_bind_in_use.txt")) == \
        "bind() to 127.0.0.1:8443 failed (98: Address already in use)"
    assert "cannot load certificate key" in nginx.first_error(fixture_text("nginx", "1.22.1", "t_bad_key.txt"))
    [ln, *_] = nginx.parse_error_log(fixture_text("nginx", "1.22.1", "error_not_found.log"))
    assert ln.level == "error" and ln.message.startswith("open()") and not ln.is_limit
    assert nginx.LogLine("alert", "1024 worker_connections are not enough").is_limit


def _conf(tmp_path, **kw):
    return nginx.NginxConf(str(tmp_path), "127.0.0.1", 18443, 18080, **kw)


def test_config_has_what_seed_001_asks_for(tmp_path):
    text = nginx.render(_conf(tmp_path, tls_versions=("1.2", "1.3"), ciphersuites="TLS_AES_256_GCM_SHA384"))
    for line in ("daemon off;", "sendfile on;", "listen 127.0.0.1:18443 ssl;", "listen 127.0.0.1:18080;",
                 "ssl_protocols TLSv1.2 TLSv1.3;", "ssl_conf_command Options KTLS;",
                 "ssl_conf_command Ciphersuites TLS_AES_256_GCM_SHA384;", f"pid {tmp_path}/nginx.pid;"):
        assert line in text
    assert "KTLS" not in nginx.render(_conf(tmp_path, ktls=False))


@pytest.mark.skipif(not shutil.which("nginx") or not shutil.which("openssl"), reason="nginx/openssl not installed")
def test_rendered_config_passes_nginx_t(tmp_path):
    for d in ("logs", "tmp", "www"):
        (tmp_path / d).mkdir()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "1", "-subj", "/CN=t", "-keyout", str(tmp_path / "key.pem"),
                    "-out", str(tmp_path / "cert.pem")], check=True, capture_output=True)
    (tmp_path / "nginx.conf").write_text(nginx.render(_conf(tmp_path)))
    r = subprocess.run(nginx.test_argv(str(tmp_path)), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    (tmp_path / "nginx.conf").write_text(nginx.render(_conf(tmp_path, ciphers="NOSUCHCIPHER")))
    r = subprocess.run(nginx.test_argv(str(tmp_path)), capture_output=True, text=True)
    assert r.returncode != 0 and "NOSUCHCIPHER" in nginx.first_error(r.stderr)


def test_ktls_verdicts_come_from_counters():
    sw = ktls.parse_tls_stat(fixture_text("ktls", "tls_stat_sw.txt"))
    assert sw["TlsTxSw"] == 16 and sw["TlsCurrTxSw"] == 4
    zero = {k: 0 for k in sw}
    assert ktls.verdict("https", None, None).startswith("not in use (kernel has no TLS")
    assert ktls.verdict("https", zero, zero).startswith("not in use (the kernel has TLS")
    assert ktls.verdict("https", zero, sw).startswith("software kTLS (16")
    assert ktls.verdict("https", zero, {**zero, "TlsTxDevice": 3}).startswith("NIC offload (3")
    assert ktls.verdict("http", None, None) == "n/a (plain HTTP)"
    assert ktls.verdict("https", None, None, kernel_has_tls=True).startswith("unknown")
    assert ktls.verdict("https", None, None, why="tcp_available_ulp lists mptcp") == \
        "not in use (kernel has no TLS: tcp_available_ulp lists mptcp)"


HTTPS = '''name = "h"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[hosts.c2]
role = "client"
[study]
kind = "https"
'''


def test_https_plans_are_checked():
    p = parse_plan(HTTPS + "connections = [2, 8]\nschemes = [\"https\", \"http\"]\n", "h.toml")
    from nicbench.plan.matrix import trials
    assert [t.point for t in trials(p)] == ["https/c2", "https/c8", "http/c2", "http/c8"]
    with pytest.raises(InputError) as e:
        parse_plan(HTTPS + "connections = [1]\n", "h.toml")
    assert "fewer than the 2 clients" in e.value.one_line()
    with pytest.raises(InputError) as e:
        parse_plan(HTTPS + "io_sizes = [\"4K\"]\n", "h.toml")
    line = e.value.one_line()
    assert "h.toml: study.io_sizes: unknown key" in line and "file_size" in line
    with pytest.raises(InputError) as e:
        parse_plan(HTTPS.replace('"https"', '"quic"'), "h.toml")
    line = e.value.one_line()       # every study's kind is named, whichever studies there are
    assert "study.kind: 'quic' is not allowed" in line and all(f"'{x.KIND}'" in line for x in SCHEMAS), line


def test_threads_can_be_swept():
    from nicbench.plan.matrix import trials
    p = parse_plan(HTTPS + "connections = [8]\nthreads = [1, 4]\n", "h.toml")
    assert [(t.point, t.params["threads"]) for t in trials(p)] == [("https/c8/t1", 1), ("https/c8/t4", 4)]
    assert [t.point for t in trials(parse_plan(HTTPS + "threads = 3\nconnections = [4]\n", "h.toml"))] == ["https/c4"]


def _wrk_trial(requests: int, errors: int, budget: float | None = None, server_rates: list[float] | None = None):
    from nicbench.records import Sample, TrialRecord, TrialSpec, make_tags
    spec = TrialSpec("t0001", 0, "https", "https/c8", 0, {"scheme": "https", "connections": 8})
    tags = make_tags(host="c1", scheme="https", side="receiver", direction="tx")
    samples = [Sample("t0001", "http.bytes", 5e8, "bytes", 100.0, 105.0, tags),
               Sample("t0001", "http.requests", float(requests), "count", 100.0, 105.0, tags),
               Sample("t0001", "http.socket_errors", float(errors), "count", 100.0, 105.0, tags)]
    srv = make_tags(host="srv", direction="tx")
    samples += [Sample("t0001", "if.bytes", r / 2, "bytes", 99.9 + i / 2, 100.4 + i / 2, srv)
                for i, r in enumerate(server_rates or [])]
    meta = {"server": "srv"} | ({"error_budget": budget} if budget is not None else {})
    return TrialRecord(spec, "ok", 100.0, 106.0, None, meta), samples


def test_socket_errors_beyond_the_budget_fail_the_point():
    # the audit's case: connections reset by a firewall mid-run, recorded as ok before
    from nicbench.studies.https.analysis import https_trial
    t = https_trial(*_wrk_trial(4558, 40380, 0.01), None)
    assert t.status == "failed" and t.app_gbps is None
    assert "40380 socket errors against 4558 requests" in t.error and "study.error_budget" in t.error
    ok = https_trial(*_wrk_trial(4558, 40, 0.01), None)            # 0.9 %: within the budget
    assert ok.status == "ok" and ok.socket_errors == 40 and ok.app_gbps == pytest.approx(0.8)
    assert https_trial(*_wrk_trial(4558, 400, 0.1), None).status == "ok"        # the plan may allow more
    assert https_trial(*_wrk_trial(4558, 400), None).status == "failed"          # older runs: 1 % by default


def test_a_point_failed_for_its_errors_keeps_them_in_its_errors_column():
    # the audit's case: 51,702 socket errors against 278 requests, the point failed
    # and its report's errors column said 0 (only ok repeats were counted)
    from nicbench.studies.https.analysis import https_points, https_trial
    [p] = https_points([https_trial(*_wrk_trial(278, 51702), None)], None, 1)
    assert (p.n_ok, p.n_failed) == (0, 1)
    assert (p.requests, p.socket_errors) == (278, 51702)


def test_a_server_that_went_quiet_mid_point_fails_it():
    # wrk ends at its duration whatever the server does: nginx frozen for 1.5 s of 5 s
    # gave a rate wrk reports as fine; the server's interface counters tell
    from nicbench.studies.https.analysis import https_trial
    steady = [1e8] * 11
    assert https_trial(*_wrk_trial(4558, 0, server_rates=steady), None).status == "ok"
    stalled = [1e8] * 4 + [0.0] * 3 + [1e8] * 4
    t = https_trial(*_wrk_trial(4558, 0, server_rates=stalled), None)
    assert t.status == "failed" and t.app_gbps is None
    assert "sent next to nothing" in t.error and "for 1.5 s of the 5.0 s" in t.error and "from +1.9 s" in t.error
    # half a second quiet (one read) is not a stall
    short = [1e8] * 4 + [0.0] + [1e8] * 6
    assert https_trial(*_wrk_trial(4558, 0, server_rates=short), None).status == "ok"
