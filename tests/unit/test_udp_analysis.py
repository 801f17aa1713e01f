"""The UDP study's analysis on samples made by hand: the window, received
Gbps and datagrams/s, loss from the receivers' counts, where datagrams went
by the counters, the ceiling, the repeats; and the plan's own checks.  Every
expected figure is worked out in the comments."""

from __future__ import annotations

import pytest

from nicbench.analysis.trials import LinkInfo
from nicbench.core.errors import InputError
from nicbench.plan import parse_plan
from nicbench.records import Sample, TrialRecord, TrialSpec, make_tags
from nicbench.studies.udp.analysis import udp_points, udp_trial
from nicbench.studies.udp.view import UdpView, table_rows

T0 = 100.0
CLIENTS = ("c1", "c2")


def _spec(direction: str = "tx", size: int = 1000, repeat: int = 0) -> TrialSpec:
    return TrialSpec(f"t{repeat}", repeat, "udp", f"{direction}/s1/20M/{size}B", repeat,
                     {"direction": direction, "datagram_size": size, "duration": 2, "clients": None, "streams": 1,
                      "rate": "20M", "rate_bps": 20e6, "engine": "iperf3"})


def _record(spec: TrialSpec, clients=CLIENTS) -> TrialRecord:
    return TrialRecord(spec, "ok", T0, T0 + 3, None, {
        "server": "srv", "layout": [{"client": c, "port": 5201, "streams": 1} for c in clients],
        "start_skew_s": 0.001, "socket_buffers": {f"{c}:5201": {"peer_rcvbuf": 212992} for c in clients}})


def _tool(direction: str, size: int, clients=CLIENTS, scale: float = 1.0) -> list[Sample]:
    """Per client, 4 intervals of 0.5 s from T0: the receiver expects 500
    datagrams, misses 5, gets 495 of ``size`` bytes; the sender sends 500."""
    out = []
    for c in clients:
        for i in range(4):
            t0, t1 = T0 + 0.5 * i, T0 + 0.5 * (i + 1)
            rt = make_tags(host=c, proc=5201, direction=direction, side="receiver", omitted=0, streams=1)
            st = make_tags(host=c, proc=5201, direction=direction, side="sender", omitted=0, streams=1)
            out += [Sample("t", "udp.bytes", 495 * size * scale, "bytes", t0, t1, rt),
                    Sample("t", "udp.packets", 500 * scale, "packets", t0, t1, rt),
                    Sample("t", "udp.lost", 5 * scale, "packets", t0, t1, rt),
                    Sample("t", "udp.jitter", 0.0001 * (i + 1), "s", t0, t1, rt),
                    Sample("t", "udp.bytes", 500 * size * scale, "bytes", t0, t1, st),
                    Sample("t", "udp.packets", 500 * scale, "packets", t0, t1, st)]
    return out


def _counters(fragments: int = 1) -> list[Sample]:
    """Every 0.5 s from T0 - 0.5 to T0 + 2.5, for the 1000 datagrams both
    clients are sent: 2 refused on the server (SndbufErrors), 998 leave its
    interface, 2 lost on the wire, 996 reach the clients' interfaces, 6 meet
    full socket buffers (RcvbufErrors), 990 are delivered."""
    out = []
    for i in range(6):
        t0, t1 = T0 - 0.5 + 0.5 * i, T0 + 0.5 * i

        def n(host: str, metric: str, v: float, d: str | None = None, unit: str = "count",
              t0: float = t0, t1: float = t1) -> Sample:
            return Sample("t", metric, v, unit, t0, t1, make_tags(host=host, direction=d, ifname="eth0" if d else None))
        out += [n("srv", "net.udp.sndbuf_errors", 2), n("srv", "if.packets", 998 * fragments, "tx", "packets"),
                n("srv", "if.bytes", 998 * 1042.0, "tx", "bytes"), n("srv", "if.packets", 0, "rx", "packets"),
                n("srv", "if.bytes", 0, "rx", "bytes")]
        for c in CLIENTS:
            out += [n(c, "if.packets", 498 * fragments, "rx", "packets"), n(c, "if.bytes", 498 * 1042.0, "rx", "bytes"),
                    n(c, "if.packets", 0, "tx", "packets"), n(c, "if.bytes", 0, "tx", "bytes"),
                    n(c, "net.udp.in_datagrams", 495), n(c, "net.udp.in_errors", 3), n(c, "net.udp.rcvbuf_errors", 3)]
    return out


def _cpu() -> list[Sample]:
    out = []
    for i in range(6):
        t0, t1 = T0 - 0.5 + 0.5 * i, T0 + 0.5 * i
        for cpu in ("0", "1"):
            for state, v in (("user", 0.1), ("system", 0.15), ("idle", 0.25)):
                out.append(Sample("t", "cpu.time", v, "s", t0, t1, make_tags(host="machine", cpu=cpu, state=state)))
        out.append(Sample("t", "proc.cpu", 0.2, "s", t0, t1,
                          make_tags(host="srv", role="engine-client", proc="c1:5201", kind="user")))
        out.append(Sample("t", "proc.cpu", 0.1, "s", t0, t1,
                          make_tags(host="c1", role="engine-server", proc="5201", kind="system")))
    return out


LINK = LinkInfo(1500, 20e6)


def test_one_way_trial_window_rates_loss_and_where_the_datagrams_went():
    rec = _record(_spec())
    t = udp_trial(rec, _tool("tx", 1000) + _counters() + _cpu(), trim=0.25, link=LINK)
    assert t.status == "ok", t.error
    d = t.directions["tx"]
    assert d.received.window == (pytest.approx(100.25), pytest.approx(101.75))
    # 2 clients x 495 datagrams of 1000 B per 0.5 s: 1980 datagrams/s, 15.84 Mbit/s
    assert d.datagrams_per_s == pytest.approx(1980) and t.gbps == pytest.approx(0.01584)
    assert d.sent_gbps == pytest.approx(0.016) and d.sent_per_s == pytest.approx(2000)
    assert t.loss == pytest.approx(0.01)                                   # 10 of 1000 expected
    # jitter: intervals at least half inside the window, here all four (0.1 .. 0.4 ms)
    assert d.jitter_s == pytest.approx(0.00025) and d.jitter_max_s == pytest.approx(0.0004)
    s = t.split["tx"]
    # over the 1.5 s window: 3000 sent, 6 refused, 2994 out, 2988 in, 2970 delivered, 18 buffer-full
    assert (s.sent, s.sndbuf_errors, s.wire_out, s.wire_in) == pytest.approx((3000, 6, 2994, 2988))
    assert (s.delivered, s.rcvbuf_errors, s.received) == pytest.approx((2970, 18, 2970))
    assert s.on_wire == pytest.approx(6) and s.before_udp == pytest.approx(0)
    assert s.loss == pytest.approx(t.loss)                 # the counters agree with the tool: 30 of 3000
    assert t.receive_buffer == 212992
    # CPU: 2 CPUs each 50 % busy; the engine client 0.4 cores on srv, the server 0.2 on c1
    assert t.cpu is not None and t.cpu.cores_busy == pytest.approx(1.0)
    assert t.cpu_by_host() == {"srv": pytest.approx(0.4), "c1": pytest.approx(0.2)}


def test_fragmented_datagrams_count_frames_per_datagram():
    # 4000 B at MTU 1500: three frames a datagram, so frames / 3 are datagrams again
    t = udp_trial(_record(_spec(size=4000)), _tool("tx", 4000) + _counters(fragments=3), trim=0.25, link=LINK)
    assert t.fragments == 3 and t.split["tx"].wire_out == pytest.approx(2994)


def test_bidir_takes_the_worse_direction_and_has_no_split():
    spec = _spec("bidir")
    samples = _tool("tx", 1000) + _tool("rx", 1000, scale=1.0)
    samples = [s for s in samples if not (s.metric == "udp.lost" and s.tag("direction") == "rx")]
    samples += [Sample("t", "udp.lost", 20.0, "packets", s.t_start, s.t_end, s.tags) for s in samples
                if s.metric == "udp.packets" and s.tag("direction") == "rx" and s.tag("side") == "receiver"]
    t = udp_trial(_record(spec), samples + _counters(), trim=0.25, link=LINK)
    assert t.status == "ok" and set(t.directions) == {"tx", "rx"} and t.split == {}
    assert t.loss == pytest.approx(0.04) and t.gbps == pytest.approx(2 * 0.01584)


def test_a_process_without_receiver_data_fails_the_trial():
    samples = _tool("tx", 1000, clients=("c1",))
    t = udp_trial(_record(_spec()), samples, trim=0.25, link=LINK)
    assert t.status == "failed" and "no tx receiver data from c2:5201" in t.error


def test_points_take_the_median_of_repeats_against_the_ceiling():
    trials = [udp_trial(_record(_spec(repeat=r)), _tool("tx", 1000, scale=k), trim=0.25, link=LINK)
              for r, k in enumerate((1.0, 0.9, 1.1))]
    [p] = udp_points(trials, LINK)
    assert p.n_ok == 3 and p.gbps == pytest.approx(0.01584)
    assert p.gbps_min == pytest.approx(0.9 * 0.01584) and p.gbps_max == pytest.approx(1.1 * 0.01584)
    # 20 Mbit/s of 1000-byte datagrams: 1000 / (1000 + 8 + 20 + 14 + 4 + 20) of the link
    assert p.ceiling_gbps == pytest.approx(0.02 * 1000 / 1066)
    assert p.of_ceiling == pytest.approx(0.01584 / (0.02 * 1000 / 1066)) and not p.above_ceiling
    [row] = table_rows([p])
    assert row["received_bps"] == pytest.approx(15.84e6) and row["loss"] == pytest.approx(0.01)
    assert row["fragments"] == 1 and row["rate_per_client_bps"] == 20e6


def test_compare_names_throughput_and_loss_lower_is_better():
    from nicbench.report.view import RunView
    trials = [udp_trial(_record(_spec(repeat=r)), _tool("tx", 1000), trim=0.25, link=LINK) for r in range(2)]
    view = RunView(None, None, {}, trials, udp_points(trials, LINK))  # type: ignore[arg-type]
    gbps, loss = UdpView().compare_values(view)
    assert gbps.higher_is_better and not loss.higher_is_better
    assert loss.values == {"tx/s1/20M/1000B": [pytest.approx(1.0), pytest.approx(1.0)]}      # percent


BASE = 'name = "u"\n[hosts.srv]\nrole = "server"\n[hosts.c1]\nrole = "client"\n[study]\nkind = "udp"\n'


@pytest.mark.parametrize("study, message", [
    ('rates = ["1G"]\ndatagram_sizes = [65508]', "65508 bytes is above 65507, the most UDP payload one IPv4"),
    ('rates = ["1G"]\ndatagram_sizes = [15]', "15 bytes is below 16, the header iperf3 and iperf 2 write"),
    ('rates = ["100MB"]', "study.rates[0]: rate '100MB': rates are bits per second"),
    ('rates = ["100"]', "rate '100' has no decimal prefix"),
    ('rates = [100]', "rate 100 has no unit"),
    ('datagram_sizes = [1472]', "study.rates: Field required"),
    ('rates = ["1G"]\nclient_counts = [2]', "study.client_counts: 2 clients asked, the plan has 1"),
    ('rates = ["1G"]\nduration = 2.5', "iperf3 takes whole seconds"),
])
def test_bad_plans_are_one_line_errors_naming_the_key(study, message):
    with pytest.raises(InputError) as e:
        parse_plan(BASE + study)
    assert message in e.value.one_line() and "\n" not in e.value.one_line()


def test_points_are_keyed_by_direction_clients_streams_rate_and_size():
    p = parse_plan(BASE + 'rates = ["500M", "unlimited", "max"]\ndatagram_sizes = [64, 9000]\nclient_counts = [1]')
    keys = [k for k, _ in p.study.points()]
    assert keys == ["tx/c1/s1/500M/64B", "tx/c1/s1/500M/9000B", "tx/c1/s1/unlimited/64B",
                    "tx/c1/s1/unlimited/9000B", "tx/c1/s1/max/64B", "tx/c1/s1/max/9000B"]
    params = dict(p.study.points())
    assert params["tx/c1/s1/max/64B"]["search"] and params["tx/c1/s1/500M/64B"]["rate_bps"] == 5e8
    assert params["tx/c1/s1/unlimited/64B"]["rate_bps"] is None
    # a search costs up to 1 + search_steps measurements: (1 + 1 + 9) / 3 of omit + duration on average
    assert p.study.measured_seconds() == pytest.approx((1 + 5) * 11 / 3)
