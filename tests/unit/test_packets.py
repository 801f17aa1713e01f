"""Packet study, pure parts: frames, nbgen/trafgen parsers on recorded output,
plan checks, the window arithmetic and the ceiling."""

from __future__ import annotations

import ipaddress
import json
import struct
from pathlib import Path

import pytest

from nicbench.core.errors import InputError, ToolError
from nicbench.plan.load import parse_plan
from nicbench.plan.matrix import trials
from nicbench.records import Sample, TrialRecord, TrialSpec, make_tags
from nicbench.studies.packets.analysis import ceiling_mpps, packet_points, packet_trial, port_table
from nicbench.studies.packets.runner import generator_argv, missing_caps, xdp_attached
from nicbench.tools import frames, nbgen, trafgen

FIX = Path(__file__).parent.parent / "fixtures"
NB = FIX / "nbgen" / "1.0.0"
TG = FIX / "trafgen" / "0.6.8"
MACS = dict(src_mac="16:06:ea:06:06:14", dst_mac="de:08:e4:79:ff:38")


def _sum16(b: bytes) -> int:
    """Ones'-complement sum, folded: a correct checksum makes it 0xffff."""
    if len(b) % 2:
        b += b"\0"
    s = 0
    for i in range(0, len(b), 2):
        s += (b[i] << 8) | b[i + 1]
        s = (s & 0xFFFF) + (s >> 16)
    return s


@pytest.mark.parametrize("size", [64, 65, 128, 1518, 9018])
def test_ipv4_frame_layout_and_checksums(size):
    f = frames.udp_frame(src_ip="198.19.0.1", dst_ip="198.19.0.2", size=size, sport=1030, **MACS)
    assert len(f) == size - 4                                # the NIC adds the FCS
    assert f[:6] == bytes.fromhex("de08e479ff38") and f[12:14] == b"\x08\x00"
    ip = f[14:34]
    assert _sum16(ip) == 0xFFFF                              # header checksum verifies
    assert struct.unpack("!H", ip[2:4])[0] == size - 4 - 14  # IP total length
    udp = f[34:]
    sport, dport, ulen, _ = struct.unpack("!HHHH", udp[:8])
    assert (sport, dport, ulen) == (1030, 9, len(udp))
    pseudo = ip[12:20] + struct.pack("!BBH", 0, 17, ulen)
    assert _sum16(pseudo + udp) == 0xFFFF                    # UDP checksum verifies
    assert udp[8:16] == b"nicbench"[:min(8, len(udp) - 8)]


def test_ipv6_frame_layout_and_checksum():
    f = frames.udp_frame(src_ip="2001:2::1", dst_ip="2001:2::2", size=128, **MACS)
    assert len(f) == 124 and f[12:14] == b"\x86\xdd"
    ip6 = f[14:54]
    assert ip6[6] == 17 and struct.unpack("!H", ip6[4:6])[0] == 124 - 54
    assert ipaddress.ip_address(ip6[8:24]) == ipaddress.ip_address("2001:2::1")
    udp = f[54:]
    pseudo = ip6[8:40] + struct.pack("!I", len(udp)) + b"\0\0\0\x11"
    assert _sum16(pseudo + udp) == 0xFFFF


def test_frame_size_limits():
    assert frames.min_frame(4) == 64 and frames.min_frame(6) == 66
    with pytest.raises(ValueError, match="at least 66"):
        frames.udp_frame(src_ip="2001:2::1", dst_ip="2001:2::2", size=64, **MACS)
    with pytest.raises(ValueError, match="same IP version"):
        frames.udp_frame(src_ip="198.19.0.1", dst_ip="2001:2::2", size=128, **MACS)


def test_thread_frames_differ_only_in_source_port_and_trafgen_config():
    fs = frames.thread_frames(3, src_ip="198.19.0.1", dst_ip="198.19.0.2", size=64, **MACS)
    assert [struct.unpack("!H", f[34:36])[0] for f in fs] == [1024, 1025, 1026]
    assert fs[0][:34] == fs[1][:34]
    conf = frames.trafgen_config(fs[:2], [0, 1]).splitlines()
    assert conf[0].startswith("cpu(0): { 0xde, 0x08,") and conf[1].startswith("cpu(1): {")
    assert len(conf[0].split("{")[1].split(",")) == 60
    assert frames.trafgen_config(fs[:1]).startswith("{ 0xde")


def test_nbgen_tx_parsed_from_recorded_output():
    tx = nbgen.parse_tx((NB / "tx-two-threads.out").read_text())
    assert tx.sent == 23425216 == sum(tx.per_cpu)
    assert tx.reads[0] == (tx.t_start, 0) and tx.reads[-1] == (tx.t_end, tx.sent)
    assert [r[1] for r in tx.reads] == sorted(r[1] for r in tx.reads)
    assert [t["cpu"] for t in tx.threads] == [0, 1] and not tx.stopped
    rate = nbgen.parse_tx((NB / "tx-rate.out").read_text())
    assert rate.paced_out > rate.sent and 0.95 < rate.sent / 1.5 / 1e5 < 1.0


@pytest.mark.parametrize("case, words", [
    ("tx-too-big", "refused a live-frames run of 4000 bytes"),
    ("tx-no-interface", "interface nosuch0 does not exist"),
])
def test_nbgen_tx_errors_are_its_own_words(case, words):
    out = NB / f"{case}.out"
    with pytest.raises(ToolError) as e:
        nbgen.parse_tx(out.read_text() if out.exists() else "", (NB / f"{case}.err").read_text(), where="gen")
    assert words in e.value.one_line() and "gen" in e.value.one_line()


def test_nbgen_rx_parsed_native_generic_and_killed():
    rx = nbgen.parse_rx((NB / "rx-native.out").read_text())
    assert rx.mode == "native" and rx.ended and rx.packets == 19987728 == sum(rx.per_cpu)
    assert rx.bytes == 2118404032 and rx.reads[0][1:] == (0, 0)
    lo = nbgen.parse_rx((NB / "rx-generic-lo.out").read_text())
    assert lo.mode == "generic" and "native XDP refused by the driver" in lo.why
    killed = nbgen.parse_rx((NB / "rx-killed.out").read_text())
    assert not killed.ended and len(killed.reads) == 4
    for case, words in (("rx-native-refused", "has no native XDP"), ("rx-no-privileges", "CAP_BPF")):
        with pytest.raises(ToolError, match=words):
            nbgen.parse_rx("", (NB / f"{case}.err").read_text())


def test_trafgen_summary_parsed():
    one = trafgen.parse((TG / "one-cpu.out").read_text())
    assert one is not None and one.packets == 1683968 and one.bytes == 60 * one.packets
    assert one.per_cpu == {0: 1683968} and 2.98 < one.seconds < 2.99
    two = trafgen.parse((TG / "two-cpus.out").read_text())
    assert two is not None and sum(two.per_cpu.values()) == two.packets and set(two.per_cpu) == {0, 1}
    assert trafgen.parse((TG / "ring-flush-failed.out").read_text()) is None
    assert trafgen.parse((TG / "no-interface.out").read_text()) is None


def test_trafgens_full_send_buffer_panic_is_named_with_what_to_do():
    """Recorded in the SSH lab test (ssh_flush_eagain.*, trafgen 0.6.8 at full
    rate into an XDP receiver over veth, 1.56 s into 2 s): trafgen's ring flush
    met a full send buffer (EAGAIN) and it gave up, exit 1, no summary."""
    err = (TG / "ssh_flush_eagain.err").read_text()
    assert trafgen.parse((TG / "ssh_flush_eagain.out").read_text()) is None
    hint = trafgen.failure_hint(err)
    assert hint is not None and "send buffer is full" in hint and "study.rate" in hint and "wmem_default" in hint
    assert trafgen.failure_hint((TG / "no-interface.out").read_text()) is None


def test_trafgen_argv_is_bounded_and_leaves_sysctls_alone():
    a = trafgen.argv("pk0", "/x.cfg", duration=3, cpus=2, rate=1000, frame_size=9018)
    assert a[:4] == ["timeout", "-s", "INT", "3"] and "--no-sock-mem" in a
    assert "--jumbo-support" in a and a[a.index("--rate") + 1] == "1000pps"


def test_capabilities_and_attached_xdp():
    root = int("000001ffffffffff", 16)
    assert missing_caps(root, "nbgen") == [] and missing_caps(0, "nbgen") == ["CAP_NET_ADMIN", "CAP_BPF",
                                                                             "CAP_PERFMON"]
    assert missing_caps(1 << 21 | 1 << 12, "nbgen") == []          # CAP_SYS_ADMIN covers BPF on old kernels
    assert missing_caps(0, "trafgen") == ["CAP_NET_RAW"]
    info = json.loads((FIX / "nbgen" / "ip-link-xdp.json").read_text())[0]
    assert "nb_rx" in xdp_attached(info) and "mode" in xdp_attached(info)
    assert xdp_attached({"ifname": "pk0"}) is None


PKT = '''name = "p"
[hosts.gen]
role = "server"
[hosts.rx]
role = "client"
[study]
kind = "packets"
'''


def test_packet_plan_matrix_and_defaults():
    p = parse_plan(PKT + 'engines = ["nbgen", "trafgen"]\nframe_sizes = [64, 1518]\nports = [1, 2]\n', "p.toml")
    pts = [t.point for t in trials(p)]
    assert pts[0] == "nbgen/ipv4/p1/t1/64B" and len(pts) == 8 and "trafgen/ipv4/p2/t1/1518B" in pts
    assert p.study.line_rate == 10e9 and p.study.threads == [1]


@pytest.mark.parametrize("extra, words", [
    ("frame_sizes = [60]\n", "study.frame_sizes: 60 is below the 64-byte minimum"),
    ("frame_sizes = [64]\nip_versions = [6]\n", "66"),
    ("engines = [\"trafgen\"]\nframe_sizes = [9018]\n", "above the MTU (1500 + 18"),
    ("frame_sizes = [64, 64]\n", "must not repeat"),
    ("frame_sizes = [4000]\n", "nbgen's live frames"),
    ('engines = ["pktgen"]\n', "study.engines"),
    ("threads = 0\n", "study.threads"),
    ('search = "ndr"\nrate = 1000\n', "chooses the rate itself"),
])
def test_bad_packet_plans_are_one_line_errors(extra, words):
    with pytest.raises(InputError) as e:
        parse_plan(PKT + extra, "p.toml")
    line = e.value.one_line()
    assert "p.toml" in line and words in line and "\n" not in line


def test_packet_plan_refuses_shaping_and_two_receivers():
    with pytest.raises(InputError, match="study.line_rate"):
        parse_plan(PKT.replace("[study]", '[link]\nspeed = "10G"\n[study]'), "p.toml")
    with pytest.raises(InputError, match="one receiver"):
        parse_plan(PKT.replace("[study]", '[hosts.rx2]\nrole = "client"\n[study]'), "p.toml")
    jumbo = parse_plan(PKT.replace("[study]", "[link]\nmtu = 9000\n[study]") + 'engines = ["trafgen"]\n'
                       'frame_sizes = [9018]\n', "p.toml")
    assert jumbo.study.frame_sizes == [9018]


def test_ceiling_is_line_rate_in_frames():
    assert ceiling_mpps(40e9, 64, 1) == pytest.approx(59.5238, rel=1e-4)      # the seed's 40G port
    assert ceiling_mpps(10e9, 1518, 2) == pytest.approx(2 * 0.812744, rel=1e-5)
    assert ceiling_mpps(None, 64, 1) is None


def _trial(engine="nbgen", rx_rate=1e6, tx_rate=1.01e6, span=(100.0, 105.0), ports=("pk0",), status="ok"):
    spec = TrialSpec("t0001", 0, "packets", f"{engine}/ipv4/p{len(ports)}/t1/64B", 0,
                     {"engine": engine, "ip": 4, "ports": len(ports), "threads": 1, "frame_size": 64})
    meta = {"generator": "gen", "receiver": "rx", "tx": {p: {"span": list(span)} for p in ports},
            "rx": {p: {"mode": "native"} for p in ports}}
    samples = []
    t = span[0] - 0.3
    while t < span[1] + 0.3:
        for p in ports:
            samples.append(Sample("t0001", "pkt.received", rx_rate * 0.25, "packets", t, t + 0.25,
                                  make_tags(host="rx", port=p, side="receiver")))
            samples.append(Sample("t0001", "pkt.sent", tx_rate * 0.25, "packets", t, t + 0.25,
                                  make_tags(host="gen", port=p, side="sender")))
            samples.append(Sample("t0001", "if.packets", tx_rate * 0.25, "packets", t, t + 0.25,
                                  make_tags(host="gen", ifname=p, direction="tx")))
        t += 0.25
    return TrialRecord(spec, status, span[0], span[1], None if status == "ok" else "boom", meta), samples


def test_trial_rates_loss_and_trimmed_window():
    rec, samples = _trial(ports=("pk0", "pk1"))
    t = packet_trial(rec, samples, trim=0.5)
    assert t.window == (100.5, 104.5)
    assert t.rx_pps == pytest.approx(2e6) and t.tx_pps == pytest.approx(2.02e6)
    assert t.loss == pytest.approx(1 - 1 / 1.01) and set(t.per_port_rx_pps) == {"pk0", "pk1"}
    tg = packet_trial(*_trial(engine="trafgen", tx_rate=1.5e6), trim=0.5)
    assert tg.tx_pps == pytest.approx(1.5e6) == tg.if_tx_pps      # trafgen: the interface's rate
    pts = packet_points([t], 40e9)
    assert pts[0].rx_mpps == pytest.approx(2.0) and pts[0].of_ceiling == pytest.approx(2.0 / 119.0476, rel=1e-4)
    assert pts[0].gbps_l2 == pytest.approx(2e6 * 64 * 8 / 1e9) and pts[0].gbps_l1 == pytest.approx(2e6 * 84 * 8 / 1e9)
    assert port_table(pts)[0]["mpps"] == {2: pytest.approx(2.0)}


def test_trial_without_cover_or_window_fails_with_a_reason():
    rec, samples = _trial()
    short = [s for s in samples if not (s.metric == "pkt.received" and s.t_start > 103)]
    assert "do not cover" in packet_trial(rec, short, trim=0.5).error
    assert "no window" in packet_trial(rec, samples, trim=3.0).error
    failed = packet_trial(*_trial(status="failed"), trim=0.5)
    assert failed.status == "failed" and failed.error == "boom"


def test_ndr_search_bisects_to_the_highest_lossless_rate(monkeypatch, tmp_path):
    """The search loop against a path that carries at most 3 Mpps: flat out
    loses, bisection closes in from below, the best passing step is kept."""
    from types import SimpleNamespace

    from nicbench.run.kit import PointEnv
    from nicbench.studies.packets import runner as run_packets
    tried = []

    def measure(ctx, env, spec, raw_dir, rate):
        tried.append(rate)
        tx = rate if rate else 5e6
        rec, samples = _trial(rx_rate=min(tx, 3e6), tx_rate=tx)
        return TrialRecord(spec, "ok", rec.started, rec.ended, None, dict(rec.meta)), samples, []

    monkeypatch.setattr(run_packets, "_measure", measure)
    ctx = SimpleNamespace(study=SimpleNamespace(search="ndr", search_steps=4, trim=0.5, loss_threshold=0.001,
                                                rate=None))
    spec = _trial()[0].spec
    rec, samples, _ = run_packets.run_trial(ctx, PointEnv(), spec, tmp_path)
    assert tried == [None, 2.5e6, 3.75e6, 3.125e6, 2.8125e6]
    assert rec.status == "ok" and rec.meta["ndr"]["rate_per_port"] == 2.8125e6
    assert [s["passed"] for s in rec.meta["ndr"]["steps"]] == [False, True, False, False, True]
    assert packet_trial(rec, samples, 0.5).rx_pps == pytest.approx(2.8125e6)


def test_ndr_reports_when_no_rate_is_clean(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from nicbench.run.kit import PointEnv
    from nicbench.studies.packets import runner as run_packets

    def measure(ctx, env, spec, raw_dir, rate):
        rec, samples = _trial(rx_rate=(rate or 5e6) * 0.5, tx_rate=rate or 5e6)
        return TrialRecord(spec, "ok", rec.started, rec.ended, None, dict(rec.meta)), samples, []

    monkeypatch.setattr(run_packets, "_measure", measure)
    ctx = SimpleNamespace(
        study=SimpleNamespace(search="ndr", search_steps=3, trim=0.5, loss_threshold=0.001, rate=None)
    )
    rec, samples, _ = run_packets.run_trial(ctx, PointEnv(), _trial()[0].spec, tmp_path)
    assert rec.status == "failed" and samples == []
    assert "no rate tried had loss <= 0.100% (lowest tried 625000 frames/s per port)" in rec.error


def test_generator_argv_per_engine_and_trafgen_rate_on_one_sender():
    fs = frames.thread_frames(2, src_ip="198.19.1.1", dst_ip="198.19.1.2", size=64, **MACS)
    argv, conf, pin = generator_argv(
        "nbgen", "/nb", "pk1", fs, duration=3, pin=[0, 1], rate=None, frame_size=64, conf="/c"
    )
    assert conf is None and argv[argv.index("--cpus") + 1] == "0,1" and argv.count("--frame") == 2
    argv, conf, pin = generator_argv(
        "trafgen", "/nb", "pk1", fs, duration=3, pin=[1, 0], rate=None, frame_size=64, conf="/c"
    )
    assert argv[argv.index("--cpus") + 1] == "2" and conf.startswith("cpu(1): {") and pin == [1, 0]
    # with a rate trafgen runs one sender on CPU 0: no frame may be bound elsewhere
    argv, conf, pin = generator_argv(
        "trafgen", "/nb", "pk1", fs, duration=3, pin=[1, 0], rate=5e4, frame_size=64, conf="/c"
    )
    assert argv[argv.index("--cpus") + 1] == "1" and "cpu(" not in conf and conf.count("{") == 2
    assert argv[argv.index("--rate") + 1] == "50000pps" and pin == [0]


def test_sender_side_drops_and_overcounts_are_said():
    rec, samples = _trial(rx_rate=0.9e6, tx_rate=1e6)
    drops = [
        Sample(
            "t0001",
            "if.drops",
            0.1e6 * 0.25,
            "packets",
            s.t_start,
            s.t_end,
            make_tags(host="gen", ifname="pk0", direction="tx"),
        )
        for s in samples
        if s.metric == "if.packets"
    ]
    t = packet_trial(rec, samples + drops, trim=0.5)
    assert t.tx_drops_pps == pytest.approx(1e5) and any("at the sender" in w for w in t.warnings)
    rec_tg, s_tg = _trial(engine="trafgen", rx_rate=0.9e6, tx_rate=0.9e6)
    tg = packet_trial(rec_tg, s_tg + drops, trim=0.5)
    assert tg.tx_pps == pytest.approx(1.0e6) and tg.loss == pytest.approx(0.1)  # refused frames were sent
    over = packet_trial(*_trial(rx_rate=1.1e6, tx_rate=1e6), trim=0.5)
    assert over.loss == 0.0 and any("more frames than were sent" in w for w in over.warnings)


def test_a_port_without_receiver_counts_fails_the_trial():
    rec, samples = _trial(ports=("pk0", "pk1"))
    one = [s for s in samples if not (s.metric == "pkt.received" and s.tag("port") == "pk1")]
    t = packet_trial(rec, one, trim=0.5)
    assert t.status == "failed" and "2 port(s)" in t.error
