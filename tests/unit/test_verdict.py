"""Why not line rate (analysis/verdict.py): one limit per point from what was
measured over its window, the evidence beside it, "none found" with what
was checked when nothing clears a bar."""

from __future__ import annotations

import json

import pytest
from test_analysed_status import runs  # noqa: F401 - the module's fixture: two fake runs in one archive
from test_archive_cli import nb

from nicbench.analysis.cpu import CpuUsage
from nicbench.analysis.verdict import CPU_FULL, WIRE_SHARE, Evidence, Verdict, decide, point_verdict


def cpu(busy: dict[str, float], state: str = "softirq", tools: dict[str, float] | None = None) -> CpuUsage:
    per = {c: {state: b, "idle": 1 - b} for c, b in busy.items()}
    top = max(busy, key=lambda c: busy[c])
    return CpuUsage("machine", (0.0, 2.0), len(busy), per, sum(busy.values()), top, busy[top], state,
                    tools or {})


G = 1e9


def test_a_full_link_is_wire_whatever_else_ran_hot():
    v = decide(Evidence({"tx": 0.99 * 1.88 * G}, 1.88 * G, cpu=cpu({"0": 0.99, "1": 0.4})))
    assert v.limit == "wire" and v.confidence == "high"
    assert "99.0 % of its 1.88 Gbit/s ceiling" in v.evidence[0]
    assert any(c.startswith("also: cpu: CPU 0 of machine 99.0 % busy") for c in v.checked)
    # every direction must be full: bidir with one side short is not the wire's
    assert decide(Evidence({"tx": 1.87 * G, "rx": 1.5 * G}, 1.88 * G)).limit != "wire"
    # no ceiling (unshaped) but the interface at the link's speed
    assert decide(Evidence({"tx": 9e9}, None, {"tx": 9.9e9}, 10e9)).limit == "wire"


def test_a_cpu_saturated_in_softirq_names_the_core_and_the_fix():
    v = decide(Evidence({"tx": 0.4 * G}, 1.88 * G, cpu=cpu({"0": 0.99, "1": 0.5})))
    assert v.limit == "cpu" and "CPU 0 of machine 99.0 % busy, mostly softirq" in v.evidence[0]
    assert "RSS" in v.evidence[0]
    assert any(c.startswith("wire: tx goodput 21.3 % of its ceiling") for c in v.checked)


def test_an_engine_at_a_full_core_is_the_limit_not_the_cpu_it_fills():
    tools = {"engine-client srv c1:5201": 0.99, "engine-server c1 5201": 0.3}
    v = decide(Evidence({"tx": 0.4 * G}, None, cpu=cpu({"0": 0.99, "1": 0.3}, "user", tools)))
    assert v.limit == "engine" and "engine-client c1:5201 on srv used 99.0 % of one core" in v.evidence[0]
    # a core full of softirq beside a full engine: the evidence is split
    m = decide(Evidence({"tx": 0.4 * G}, None, cpu=cpu({"0": 0.99, "1": 0.3}, "softirq", tools)))
    assert m.limit == "mixed" and {m.leading, m.second} == {"engine", "cpu"} and m.confidence == "split"


def test_loss_is_located_and_weighed():
    v = decide(Evidence({"tx": 0.5 * G}, 1.88 * G, retrans_segs=300, out_segs=10000,
                        drops={"srv if.drops.rx": 40}, frames=10000))
    assert v.limit == "loss" and "retransmitted 300 of 10000 TCP segments (3.0 %)" in v.evidence[0]
    assert "srv if.drops.rx 40 (0.4 % of the frames carried)" in v.evidence[0]


def test_nothing_saturated_is_none_found_with_what_was_checked():
    v = decide(Evidence({"tx": 0.5 * G}, 1.88 * G, cpu=cpu({"0": 0.5, "1": 0.4}), retrans_segs=1, out_segs=10000))
    assert v.limit == "none found" and v.evidence == ()
    checked = " | ".join(v.checked)
    for what in ("wire: tx goodput 26.6 %", "cpu: busiest CPU 0 of machine at 50.0 %", "loss: 0.0 % of TCP",
                 "window: not measured"):
        assert what in checked
    # and without measurements it says what could not be checked, never a guess
    bare = decide(Evidence({"tx": 0.5 * G}))
    assert bare.limit == "none found" and any("CPU not measured" in c for c in bare.checked)


@pytest.mark.parametrize(("share", "limit"), [(WIRE_SHARE + 0.001, "wire"), (WIRE_SHARE - 0.001, "none found")])
def test_the_wire_threshold_is_where_it_says(share, limit):
    assert decide(Evidence({"tx": share * G}, 1.0 * G)).limit == limit
    assert CPU_FULL == 0.95


def test_a_points_verdict_over_its_repeats():
    cpu_v, wire_v = Verdict("cpu", ("CPU 0 ...",)), Verdict("wire", ("tx ...",))
    assert point_verdict([]) is None
    assert point_verdict([cpu_v, cpu_v]) == cpu_v
    two_one = point_verdict([cpu_v, wire_v, cpu_v])
    assert two_one.limit == "cpu" and two_one.confidence == "split" and "2 of 3 repeats" in two_one.evidence[-1]
    even = point_verdict([cpu_v, wire_v])
    assert even.limit == "mixed" and (even.leading, even.second) == ("cpu", "wire")


def test_explain_a_stored_run(capsys, runs):  # noqa: F811
    store, good, bad = runs
    code, out, err = nb(capsys, "explain", good, "--json", "--store", store)
    assert code == 0, err
    doc = json.loads(out)
    [p] = doc["points"]
    assert p["point"] == "tx/c4/io128K" and p["verdict"]["limit"] in ("wire", "cpu", "engine", "loss", "none found",
                                                                      "mixed")
    assert p["verdict"]["evidence"] or p["verdict"]["checked"]
    code, out, err = nb(capsys, "explain", good, "--point", "tx/c4/io12K", "--store", store)
    assert code == 2 and "has no point 'tx/c4/io12K'" in err and "did you mean tx/c4/io128K?" in err
    # a point whose repeats all failed has no verdict, and says so
    code, out, err = nb(capsys, "explain", bad, "--store", store)
    assert code == 0 and "tx/c4/io128K: no verdict (no ok repeat to judge)" in out


def test_a_paced_udp_point_that_got_what_it_asked_for_is_application_limited():
    v = decide(Evidence({"tx": 0.399 * G}, 0.479 * G, offered_bps=0.4 * G, datagram_loss=0.0, tcp=False,
                        cpu=cpu({"0": 0.99, "1": 0.5})))
    assert v.limit == "none found" and v.evidence[0].startswith("application-limited: the senders were paced to 0.4")
    assert any(c.startswith("also: cpu:") for c in v.checked)
    assert not any("window" in c for c in v.checked)          # UDP: no TCP window to check


def test_udp_loss_is_located():
    v = decide(Evidence({"tx": 0.3 * G}, 0.479 * G, offered_bps=0.4 * G, datagram_loss=0.25, tcp=False,
                        loss_where={"c1 socket buffer full": 9000.0, "between the interfaces": 10.0}))
    assert v.limit == "loss"
    assert v.evidence[0] == ("25.0 % of the datagrams were lost (c1 socket buffer full 9000, "
                             "between the interfaces 10)")


def _sender(t0: float, rate_bps: float, wnd: float, cwnd: float, rtt: float, proc: str = "5201") -> list:
    from nicbench.records import Sample, make_tags
    tags = make_tags(host="c1", proc=proc, direction="tx", side="sender", omitted=0)
    return [Sample("t", "tcp.bytes", rate_bps / 8 * 0.5, "bytes", t0, t0 + 0.5, tags),
            Sample("t", "tcp.rtt", rtt, "s", t0, t0 + 0.5, tags),
            Sample("t", "tcp.snd_wnd", wnd, "bytes", t0, t0 + 0.5, tags),
            Sample("t", "tcp.snd_cwnd", cwnd, "bytes", t0, t0 + 0.5, tags)]


def test_a_sender_moving_a_receive_window_per_round_trip_is_window_limited():
    """iperf3 reports each stream's rtt, snd_cwnd and snd_wnd per interval: a
    sender that moved about one receiver window per round trip, that window
    under its congestion window, waited on the window."""
    from nicbench.analysis.aggregate import DirectionAggregate
    from nicbench.studies.tcp.analysis import window_share
    rx = {"tx": DirectionAggregate("tx", "receiver", (0.0, 2.0), 1.0, 0.0, {}, ())}
    # 8 KiB per 100 us = 0.655 Gbit/s: the window's pace
    paced = [x for i in range(4) for x in _sender(i * 0.5, 0.64e9, 8192, 65536, 100e-6)]
    share, text = window_share(paced, rx, 0.94e9)
    assert share == pytest.approx(1.0) and "median window 8 KiB" in text and "100 us RTT" in text
    assert "bandwidth-delay product at its ceiling is 11 KiB" in text
    v = decide(Evidence({"tx": 0.64e9}, 0.94e9, window=(share, text)))
    assert v.limit == "window" and v.evidence[0].startswith("100% of the bytes were sent waiting")
    # far below the window's pace (something else held it), or a window above the cwnd: not waiting
    slow = [x for i in range(4) for x in _sender(i * 0.5, 0.2e9, 8192, 65536, 100e-6)]
    assert window_share(slow, rx, 0.94e9)[0] == 0.0
    open_ = [x for i in range(4) for x in _sender(i * 0.5, 0.64e9, 65536, 8192, 100e-6)]
    assert window_share(open_, rx, 0.94e9)[0] == 0.0
    assert window_share([], rx, None) is None        # an engine without the sender's TCP state
    # a closed window (zero: the receiving application not reading, as on a machine busy elsewhere)
    # is not a window too small -- every byte passes "a window per round trip" at a window of 0
    shut = [x for i in range(4) for x in _sender(i * 0.5, 0.3e9, 0, 65536, 100e-6)]
    share, text = window_share(shut, rx, 0.94e9)
    assert share == 0.0 and "100% were sent as a closed window reopened" in text


# ---- the other studies' shapes (HTTPS, storage, packets, latency) ----

def test_a_thread_pool_is_full_only_at_the_cores_its_threads_can_use():
    from nicbench.analysis.verdict import cpus_in, tool_cores
    assert (cpus_in("0-3,8"), cpus_in("5"), cpus_in(""), cpus_in(None)) == (5, 1, None, None)
    caps = tool_cores({"c1 wrk c1": {"allowed": "0-1"}, "srv nginx worker 0": {"allowed": "0-1"},
                       "srv target lun0": {"allowed": "0-3"}}, {"wrk": 4.0, "target": float("inf")})
    # wrk's 4 threads on 2 CPUs: 2 cores; an nginx worker is one thread; a pool: the CPUs it may use
    assert caps == {"wrk c1 c1": 2.0, "nginx srv worker 0": 1.0, "target srv lun0": 4.0, "target ": float("inf")}
    half = decide(Evidence({"tx": 0.4 * G}, 1.88 * G, cpu=cpu({"0": 0.6, "1": 0.5}, "user", {"wrk c1 c1": 1.0}),
                           tool_cores=caps))
    assert half.limit == "none found" and any("wrk c1 c1 at 1.00 of the 2 cores" in c for c in half.checked)
    full = decide(Evidence({"tx": 0.4 * G}, 1.88 * G, cpu=cpu({"0": 0.99, "1": 0.98}, "user", {"wrk c1 c1": 1.95}),
                           tool_cores=caps))
    assert full.limit == "engine" and "wrk c1 on c1 used 1.95 of the 2 cores its threads can use" in full.evidence[0]
    # a pool with no CPU list: no bar to judge it by, said so
    pool = decide(Evidence({"tx": 0.4 * G}, None, cpu=cpu({"0": 0.5}, "user", {"target srv lun9": 3.0}),
                           tool_cores=caps))
    assert pool.limit == "none found" and any("no bar to judge it by" in c for c in pool.checked)


def test_a_tool_spinning_by_design_is_no_finding_but_a_cpu_filled_by_others_is():
    spin = {"nbgen": "paced to 1 Mpps, it spins between frames by design"}
    tools = {"nbgen gen pk0": 0.97}
    v = decide(Evidence({"rx": 1e6}, 14.88e6, cpu=cpu({"0": 0.99, "1": 0.3}, "system", tools), unit="frames/s",
                        spinning=spin, tcp=False))
    assert v.limit == "none found"
    assert any(c.startswith("engine: nbgen gen pk0 at 97.0 % of a core: paced to 1 Mpps") for c in v.checked)
    assert any("nbgen spin there by design" in c for c in v.checked)
    # the spinning tool used little of the full CPU: something else filled it
    other = decide(Evidence({"rx": 1e6}, 14.88e6, cpu=cpu({"0": 0.99}, "user", {"nbgen gen pk0": 0.05}),
                            unit="frames/s", spinning=spin, tcp=False))
    assert other.limit == "cpu"


def test_socket_errors_are_loss_over_their_threshold():
    from nicbench.analysis.verdict import REQUEST_ERRORS
    v = decide(Evidence({"tx": 0.5 * G}, 1.88 * G, errors=(30.0, 1000.0, "connect 10, timeout 20")))
    assert v.limit == "loss" and v.evidence[0] == ("30 socket errors against 1000 requests (3.0 %: connect 10, "
                                                   "timeout 20)")
    under = decide(Evidence({"tx": 0.5 * G}, 1.88 * G, errors=(1.0, 10000.0, "")))
    assert under.limit == "none found" and REQUEST_ERRORS == 0.001
    assert "loss: 1 socket errors, 0.0 % of the requests (under 0.1 %)" in under.checked


def test_a_sender_short_of_the_line_with_the_receiver_keeping_up_is_the_engine():
    mpps = 1e6
    v = decide(Evidence({"rx": 4.8 * mpps}, 59.5 * mpps, unit="frames/s", what="frames received",
                        sent_bps=4.83 * mpps, sender="the generator (nbgen)", datagram_loss=0.001, tcp=False))
    assert v.limit == "engine"
    assert v.evidence[0] == ("the generator (nbgen) sent only 4.83 Mpps = 8.1 % of the ceiling, and the receivers "
                             "got 99.4 % of it: the sender is the limit")
    assert any(c.startswith("wire: rx frames received 8.1 % of its ceiling") for c in v.checked)
    # the receiver lost a third of it: the loss, located, not the sender
    lossy = decide(Evidence({"rx": 3.2 * mpps}, 59.5 * mpps, unit="frames/s", sent_bps=4.8 * mpps,
                            datagram_loss=1 / 3, lost_what="frames", tcp=False,
                            loss_where={"between the interfaces": 1000.0}))
    assert lossy.limit == "loss" and lossy.evidence[0].startswith("33.3 % of the frames were lost (between")
    # a generator that sent what it was asked and the receiver got: application-limited
    paced = decide(Evidence({"rx": 1.0 * mpps}, 59.5 * mpps, unit="frames/s", sent_bps=1.0 * mpps,
                            offered_bps=1.0 * mpps, datagram_loss=0.0, tcp=False))
    assert paced.limit == "none found" and "paced to 1 Mpps per direction" in paced.evidence[0]
    # no line rate to put it against: said, not decided
    bare = decide(Evidence({"rx": 4.8 * mpps}, None, unit="frames/s", sent_bps=4.8 * mpps, tcp=False))
    assert bare.limit == "none found" and any("no line rate known to put it against" in c for c in bare.checked)


def test_other_units_and_the_studies_own_checks():
    v = decide(Evidence({"read": 235e6}, 235.4e6, unit="B/s", what="throughput",
                        notes=("device: not measured (no device counters are sampled)",)))
    assert v.limit == "wire" and v.evidence[0] == "read throughput 235 MB/s = 99.8 % of its 235 MB/s ceiling"
    assert "device: not measured (no device counters are sampled)" in v.checked
    idle = decide(Evidence({}, None, wire_note="an idle point: the probes alone, no load to fill the link"))
    assert idle.checked[0] == "wire: an idle point: the probes alone, no load to fill the link"


def test_a_window_held_point_on_a_machine_busy_with_other_work_is_window():
    """The senders kept the receivers' windows full while a CPU was saturated
    in process context by something other than the point's tools (a shared
    lab machine): the window held it; the CPU is said, not made the limit.
    A CPU saturated in softirq (the stack's own work) still splits it."""
    window = (0.85, "85% of the bytes were sent waiting on the receivers' windows")
    busy = cpu({"0": 0.996, "1": 0.9}, state="user", tools={"engine-client srv c1:5201": 0.03})
    v = decide(Evidence({"rx": 0.018 * G}, 0.094 * G, cpu=busy, window=window))
    assert v.limit == "window" and v.evidence == (window[1],)
    assert any(c.startswith("also: cpu: CPU 0 of machine 99.6 % busy, mostly user") and "waited on the windows" in c
               for c in v.checked)
    v = decide(Evidence({"rx": 0.018 * G}, 0.094 * G, cpu=cpu({"0": 0.996}, state="softirq"), window=window))
    assert v.limit == "mixed" and (v.leading, v.second) == ("window", "cpu")
    # no line rate known (an unshaped lab link): the window may be a receiver the busy CPU kept from
    # reading -- both named (the full suite on a loaded machine judged such a point 'window')
    v = decide(Evidence({"rx": 0.018 * G}, None, cpu=busy, window=window))
    assert v.limit == "mixed" and {v.leading, v.second} == {"window", "cpu"}
    # a tool at a full core is the engine's, window or not
    hot = cpu({"0": 0.996}, state="user", tools={"engine-client srv c1:5201": 0.99})
    assert decide(Evidence({"rx": 0.018 * G}, 0.094 * G, cpu=hot, window=window)).limit != "window"
