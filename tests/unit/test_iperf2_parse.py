"""iperf 2.1.8 -y C output, recorded on this machine (tests/fixtures/capture.sh)."""

import pytest

from conftest import fixture_text
from nicbench.core.errors import ToolError
from nicbench.tools import iperf2


def load(name, role, **kw):
    return iperf2.parse(fixture_text("iperf2", "2.1.8", name), role=role, **kw)


@pytest.mark.parametrize("name, role, flow, side", [
    ("client_tx_p2.csv", "client", "fwd", "sender"),
    ("server_tx_p2.csv", "server", "fwd", "receiver"),
    ("client_rx_p2.csv", "client", "rev", "receiver"),
    ("server_rx_p2.csv", "server", "rev", "sender"),
])
def test_flow_and_side_from_server_port_and_role(name, role, flow, side):
    r = load(name, role)
    assert r.server_port == 5001
    assert {(i.flow, i.side) for i in r.intervals} == {(flow, side)}
    assert all(i.streams == 2 for i in r.intervals)      # -P 2, summed per interval
    assert len(r.intervals) == 3                          # the 0.0-3.0 summaries are not intervals
    assert r.totals[f"{flow}.{side}"] == pytest.approx(sum(i.bytes for i in r.intervals), rel=0.01)


def test_full_duplex_has_both_flows():
    c = load("client_fd.csv", "client")
    assert {(i.flow, i.side) for i in c.intervals} == {("fwd", "sender"), ("rev", "receiver")}
    s = load("server_fd.csv", "server")
    assert {(i.flow, i.side) for i in s.intervals} == {("fwd", "receiver"), ("rev", "sender")}


def test_absolute_times_and_omit():
    r = load("server_tx_p2.csv", "server", omit=1.0)
    assert [i.omitted for i in r.intervals] == [True, False, False]
    # every interval sits one second after the previous one on the wall clock,
    # although one stream's 2.0-3.0 line carries the stamp of its 1.0-2.0 line
    t0 = r.intervals[0].abs_start
    assert [round(i.abs_start - t0, 2) for i in r.intervals] == [0.0, 1.0, 2.0]


def test_single_flow_port_is_the_non_ephemeral_one_or_an_error():
    line = "20261122135706.525,198.18.99.1,{cp},198.18.99.2,{sp},1,{a}-{b},1000,8000\n"
    text = "".join(line.format(cp=43544, sp=5001, a=a, b=a + 1.0) for a in (0.0, 1.0)) + \
        line.format(cp=43544, sp=5001, a=0.0, b=2.0)
    assert iperf2.parse(text, role="client").server_port == 5001
    both_ephemeral = text.replace(",5001,", ",60000,")
    with pytest.raises(ToolError, match="cannot tell the server port") as e:
        iperf2.parse(both_ephemeral, role="client")
    assert "--port" in e.value.hint
    assert iperf2.parse(both_ephemeral, role="client", server_port=60000).intervals[0].flow == "fwd"


def test_bytecount_single_line_is_a_summary():
    r = load("client_n.csv", "client")
    assert r.intervals == () and r.totals == {"fwd.sender": 100 * 1024 * 1024}


def test_udp_lines_with_extra_fields():
    r = load("server_udp.csv", "server")
    assert r.intervals and r.intervals[0].side == "receiver"


def test_refused_client_printed_nothing():
    assert load("client_refused.csv", "client").intervals == ()


def test_human_text_is_refused():
    with pytest.raises(ToolError, match="not iperf2 CSV"):
        load("client_text.txt", "client")


def test_server_argv_carries_io_size_for_the_reverse_trap():
    argv = iperf2.server_argv(port=5001, interval=1, io_size=524288, lifetime=20)
    assert argv[argv.index("-l") + 1] == "524288" and "-t" in argv
    c = iperf2.client_argv(target="x", port=5001, duration=3, omit=1, interval=1, io_size=524288,
                           streams=2, mode="bidir")
    assert "--full-duplex" in c and c[c.index("-t") + 1] == "4"


def test_finished_flows_counts_summary_lines():
    assert iperf2.finished_flows(fixture_text("iperf2", "2.1.8", "server_tx_p2.csv"), 1.0) == 2
    assert iperf2.finished_flows(fixture_text("iperf2", "2.1.8", "server_fd.csv"), 1.0) == 2
    text = fixture_text("iperf2", "2.1.8", "server_tx_p2.csv").splitlines()
    assert iperf2.finished_flows("\n".join(text[:6]), 1.0) == 0   # intervals only: still running


def test_2_1_8_stamps_are_one_interval_late_and_are_corrected():
    """Recorded with the process's own start and end times around it: the raw
    stamps put the last interval past the process's exit; one reporting
    interval earlier they fit inside its life."""
    import json

    from nicbench.tools.base import ToolInfo
    when = json.loads(fixture_text("iperf2", "2.1.8", "client_loopback_i0.5_stamps.json"))
    text = fixture_text("iperf2", "2.1.8", "client_loopback_i0.5_stamps.csv")
    raw = iperf2.parse(text, role="client", server_port=5999, interval=0.5)
    assert max(i.abs_start + i.end - i.start for i in raw.intervals) > when["process_end"] + 0.4
    assert iperf2.stamps_late(iperf2.info_from("iperf version 2.1.8 (12 August 2022) pthreads"))
    fixed = iperf2.parse(text, role="client", server_port=5999, interval=0.5, stamp_lag=0.5)
    first = min(i.abs_start for i in fixed.intervals)
    last = max(i.abs_start + i.end - i.start for i in fixed.intervals)
    assert when["process_start"] < first < when["process_start"] + 0.05
    assert last < when["process_end"]
    assert not iperf2.stamps_late(ToolInfo("iperf", (2, 2, 0), "2.2.0", frozenset()))


def test_stamps_of_nicbenchs_own_runs_are_read_as_utc_whatever_this_machines_zone(monkeypatch):
    """iperf 2.1.8 stamps in its host's local time with no zone: a host in
    another zone than this machine would put every interval hours away.
    nicbench starts it under ``env TZ=UTC0`` and reads the stamps as UTC.
    The fixture was recorded on this machine, whose zone is UTC; read here
    as if this machine were in New York."""
    import json
    import time

    when = json.loads(fixture_text("iperf2", "2.1.8", "client_loopback_i0.5_stamps.json"))
    text = fixture_text("iperf2", "2.1.8", "client_loopback_i0.5_stamps.csv")
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        local = iperf2.parse(text, role="client", server_port=5999, interval=0.5, stamp_lag=0.5)
        utc = iperf2.parse(text, role="client", server_port=5999, interval=0.5, stamp_lag=0.5, stamps_utc=True)
    finally:
        monkeypatch.undo()
        time.tzset()
    first_local = min(i.abs_start for i in local.intervals)
    first_utc = min(i.abs_start for i in utc.intervals)
    assert abs(first_local - when["process_start"]) > 3600           # read as local time: hours away
    assert when["process_start"] < first_utc < when["process_start"] + 0.05
    for build in (iperf2.client_argv(target="x", port=1, duration=1, omit=0, interval=1, io_size=1, streams=1,
                                     mode="fwd"),
                  iperf2.server_argv(port=1, interval=1, io_size=1, lifetime=5),
                  iperf2.udp_client_argv(target="x", port=1, duration=1, omit=0, interval=1, size=64, streams=1,
                                         mode="fwd", rate_bps=1e6),
                  iperf2.udp_server_argv(port=1, interval=1, size=64, lifetime=5)):
        assert build[:3] == ["env", "TZ=UTC0", "iperf"]
