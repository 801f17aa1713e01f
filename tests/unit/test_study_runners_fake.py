"""The HTTPS, storage and packet runners against the fake transport: no root,
real recorded tool outputs.  What each runner starts, in what order, behind
which barrier, and what it makes of the outputs (the TCP runner has its own
module, test_tcp_runner_fake.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bsdfake import sockstat14
from conftest import fixture_text
from nicbench.core.errors import PreflightError
from nicbench.hosts.fake import FakeHosts, FakeTransport, Script
from nicbench.hosts.spec import DirectLink, HostSpec, HostsSpec
from nicbench.plan import parse_plan
from nicbench.plan.matrix import trials
from nicbench.run.kit import PointEnv
from nicbench.studies.https.runner import HttpsRunner
from nicbench.studies.packets.runner import PacketRunner
from nicbench.studies.storage.runner import StorageRunner
from nicbench.tools import fio

HOSTS = """
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[hosts.c2]
role = "client"
"""


def fake_hosts(plan, responders: dict, direct: int = 0) -> FakeHosts:
    hosts = tuple(HostSpec(n, h.role, "", f"198.18.0.{i + 1}", 24) for i, (n, h) in enumerate(plan.hosts.items()))
    links = tuple(DirectLink(i, plan.server, plan.clients[0]) for i in range(direct))
    return FakeHosts(HostsSpec(plan.name, 1500, hosts, None, None, links),
                     {n: FakeTransport(n, responders.get(n, lambda argv: Script())) for n in plan.hosts})


def env(tmp_path: Path) -> PointEnv:
    return PointEnv(rel=lambda p: str(Path(p).relative_to(tmp_path)))


def versions(argv: list[str]) -> Script | None:
    """What the tools say of their versions (as recorded here)."""
    known = {("nginx", "-v"): Script(stderr="nginx version: nginx/1.22.1\n"),
             ("openssl", "version"): Script("OpenSSL 3.0.17 1 Jul 2025\n"),
             ("wrk", "-v"): Script("wrk 4.1.0 [epoll] Copyright (C) 2012 Will Glozer\n"),
             ("fio", "--version"): Script("fio-3.33\n"), ("nbdkit", "--version"): Script("nbdkit 1.32.5\n")}
    if argv[0] == "ping":
        return Script("1 packets transmitted, 1 received\n")
    return known.get(tuple(argv[:2])) if len(argv) == 2 else None


# ---- HTTPS ---------------------------------------------------------------------------

HTTPS_PLAN = f"""
name = "h"
{HOSTS}
[study]
kind = "https"
schemes = ["https"]
connections = [4]
duration = 2
timeout_margin = 2
"""


def https_server(argv: list[str]) -> Script:
    if v := versions(argv):
        return v
    if argv[:2] == ["sh", "-c"] and "mktemp -d" in argv[2]:
        return Script("/tmp/nicbench-nginx.fake\n")
    if argv[0] == "nginx" and "-t" not in argv:
        return Script(hang=True, listen=(443, 80))          # the server itself, until stopped
    return Script()


def https_client(argv: list[str]) -> Script:
    if v := versions(argv):
        return v
    if argv[0] == "wrk" and "-c" in argv:
        return Script(stdout=fixture_text("wrk", "4.1.0", "https_ok.txt"), runtime=2.01)
    return Script()


def test_https_point_runs_one_wrk_per_client_behind_the_barrier_against_one_nginx(tmp_path):
    plan = parse_plan(HTTPS_PLAN)
    hosts = fake_hosts(plan, {"srv": https_server, "c1": https_client, "c2": https_client})
    r = HttpsRunner(plan, hosts)
    pre = r.preflight()
    assert pre.meta["engine_version"] == "nginx 1.22.1, wrk 4.1.0, OpenSSL 3.0.17"
    assert "nginx" in pre.tools and not pre.meta["ktls_kernel"]         # the fake has no /proc/net/tls_stat
    e = env(tmp_path)
    r.start(e, tmp_path / "https")
    srv = hosts.transport("srv")
    [nginx] = srv.spawned
    assert nginx.argv[0] == "nginx" and nginx.poll() is None
    assert (tmp_path / "https" / "nginx.conf").exists()
    [spec] = trials(plan)
    out = r.trial(e, spec, tmp_path / spec.trial_id)
    assert out.record.status == "ok", out.record.error
    wrks = [p for c in ("c1", "c2") for p in hosts.transport(c).spawned]
    assert len(wrks) == 2 and all(p.gated and p.released_at for p in wrks)
    assert max(p.spawned_at for p in wrks) <= min(p.released_at for p in wrks)     # a barrier
    assert [p.argv[p.argv.index("-c") + 1] for p in wrks] == ["2", "2"]           # 4 over 2 clients
    assert all("/fake/" in p.argv[p.argv.index("-s") + 1] for p in wrks)         # the Lua hook, put on each host
    http = {s.tag("host"): s.value for s in out.samples if s.metric == "http.bytes"}
    assert http == {"c1": 2710808292.0, "c2": 2710808292.0}
    assert out.record.meta["ktls"].startswith("not in use")
    raws = r.stop(e, tmp_path / "https")
    assert nginx.poll() is not None and all(not c.files for c in (hosts.transport("c1"), hosts.transport("c2")))
    assert any(x.tool == "nginx" for x in raws)
    assert ["rm", "-rf", "--one-file-system", "/tmp/nicbench-nginx.fake"] in srv.commands


def test_https_preflight_lists_every_missing_tool_at_once():
    plan = parse_plan(HTTPS_PLAN)
    missing = lambda argv: Script(returncode=127) if argv[0] in ("nginx", "wrk") else Script()  # noqa: E731
    r = HttpsRunner(plan, fake_hosts(plan, {"srv": missing, "c1": missing, "c2": missing}))
    with pytest.raises(PreflightError) as e:
        r.preflight()
    msg = e.value.message
    assert "srv: nginx is not installed" in msg and "c1: wrk is not installed" in msg and "c2: wrk" in msg


# ---- storage -------------------------------------------------------------------------

STORAGE_PLAN = f"""
name = "s"
{HOSTS}
[study]
kind = "storage"
target = "nbd"
luns = 2
lun_size = "64M"
ops = ["read"]
block_sizes = ["4K"]
duration = 3
ramp = 1
timeout_margin = 2
"""


def storage_target(argv: list[str]) -> Script:
    if v := versions(argv):
        return v
    if argv[0] == "nbdkit" and "--foreground" in argv:
        return Script(hang=True, listen=int(argv[argv.index("-p") + 1]))
    return Script()


def storage_initiator(argv: list[str]) -> Script:
    if v := versions(argv):
        return v
    if argv[:2] == ["fio", "--enghelp"]:
        return Script("Available IO engines:\n\tnbd\n\tlibaio\n")
    if argv[0] == "fio":
        return Script(render=fio_released_at(fixture_text("fio", "3.33", "nbd_read_status_interval.json")),
                      runtime=4.1)
    return Script()


def fio_released_at(text: str, connect: float = 0.004):
    """The recorded fio output as if released at ``t``: its report times
    moved so its jobs start measuring ``connect`` s after the 1 s ramp."""
    first = min(r.anchor_ms for rs in fio.progress(text).values() for r in rs)

    def render(t: float) -> str:
        shift = round((t + 1 + connect) * 1000) - first
        return re.sub(r'"timestamp_ms" : (\d+)', lambda m: f'"timestamp_ms" : {int(m[1]) + shift}', text)
    return render


def test_storage_point_runs_one_fio_per_initiator_over_its_own_luns(tmp_path):
    plan = parse_plan(STORAGE_PLAN)
    hosts = fake_hosts(plan, {"srv": storage_target, "c1": storage_initiator, "c2": storage_initiator})
    r = StorageRunner(plan, hosts)
    pre = r.preflight()
    assert pre.meta["assignment"] == {"c1": [0], "c2": [1]} and pre.meta["engine"] == "nbdkit + fio"
    e = env(tmp_path)
    r.start(e, tmp_path / "storage")
    targets = hosts.transport("srv").spawned
    assert [p.argv[p.argv.index("-p") + 1] for p in targets] == ["10809", "10810"]
    [spec] = trials(plan)
    out = r.trial(e, spec, tmp_path / spec.trial_id)
    assert out.record.status == "ok", out.record.error
    fios = {c: hosts.transport(c).spawned for c in ("c1", "c2")}
    assert all(len(ps) == 1 and ps[0].gated for ps in fios.values())
    assert "nbd://198.18.0.1:10809" in " ".join(fios["c1"][0].argv)
    assert "nbd://198.18.0.1:10810" in " ".join(fios["c2"][0].argv)
    written = {s.tag("host"): s.value for s in out.samples if s.metric == "storage.bytes"}
    assert set(written) == {"c1", "c2"} and all(v > 0 for v in written.values())
    assert "--status-interval=400ms" in fios["c1"][0].argv            # a 3 s point: an eighth of it, rounded
    # each job on its own timeline, from the ramp's end after its host's start stamp
    starts: dict[str, float] = {}
    for x in out.samples:
        if x.metric == "storage.bytes":
            starts[x.tag("host")] = min(starts.get(x.tag("host"), x.t_start), x.t_start)
    for c, ps in fios.items():
        assert starts[c] == pytest.approx(ps[0].released_at + 1.004, abs=0.002)
    assert {x.tag("proc") for x in out.samples} >= {"lun0#0", "lun1#1"}
    r.stop(e, tmp_path / "storage")
    assert all(p.poll() is not None for p in targets)


def test_storage_targets_on_a_freebsd_server_are_up_once_sockstat_shows_them_listening(tmp_path):
    """FreeBSD has no /proc/net: nbdkit's readiness is read from sockstat there
    (lines in the format of sockstat.c, tests/bsdfake.py)."""
    def port(p) -> str:
        return p.argv[p.argv.index("-p") + 1]

    def target(argv: list[str]) -> Script:
        if argv[:1] == ["sockstat"]:
            return Script(sockstat14([("root", "nbdkit", p.pid, 3, "tcp4", f"198.18.0.1:{port(p)}", "*:*", "LISTEN")
                                      for p in srv.spawned]))
        return Script(hang=True) if argv[0] == "nbdkit" and "--foreground" in argv else storage_target(argv)

    plan = parse_plan(STORAGE_PLAN)
    hosts = fake_hosts(plan, {"srv": target, "c1": storage_initiator, "c2": storage_initiator})
    srv = hosts.transport("srv")
    srv.os = "FreeBSD"
    r = StorageRunner(plan, hosts)
    r.preflight()
    e = env(tmp_path)
    r.start(e, tmp_path / "storage")
    assert len(srv.spawned) == 2
    assert ["sockstat", "-46", "-l", "-q", "-s", "-w", "-P", "tcp"] in srv.commands
    assert not any("/proc/" in " ".join(c) for c in srv.commands)
    r.stop(e, tmp_path / "storage")


def test_storage_point_fails_at_once_naming_a_dead_lun(tmp_path):
    plan = parse_plan(STORAGE_PLAN)
    hosts = fake_hosts(plan, {"srv": storage_target, "c1": storage_initiator, "c2": storage_initiator})
    r = StorageRunner(plan, hosts)
    r.preflight()
    e = env(tmp_path)
    r.start(e, tmp_path / "storage")
    hosts.transport("srv").spawned[1].stop()                 # LUN 1's nbdkit is gone
    out = r.trial(e, trials(plan)[0], tmp_path / "t")
    assert out.record.status == "failed" and "LUN(s) 1 are gone" in out.record.error
    assert all(not hosts.transport(c).spawned for c in ("c1", "c2"))       # no initiator started
    r.stop(e, tmp_path / "storage")


# ---- packets ---------------------------------------------------------------------------

PACKET_PLAN = """
name = "p"
[hosts.gen]
role = "server"
[hosts.sink]
role = "client"
[study]
kind = "packets"
engines = ["nbgen"]
frame_sizes = [64]
ports = [1]
threads = [2]
duration = 2
trim = 0.25
timeout_margin = 2
"""

LINK = '[{"ifname": "pk0", "address": "02:00:00:00:00:%s", "mtu": 1500, "num_rx_queues": 2}]'


def packet_host(mac: str, role: str):
    def respond(argv: list[str]) -> Script:
        if argv[:2] == ["cat", "/proc/self/status"]:
            return Script("CapEff:\t000001ffffffffff\n")
        if argv[:3] == ["ip", "-j", "-d"]:
            return Script(LINK % mac)
        if argv[:1] == ["uname"]:
            return Script("6.18.0\n")
        if argv[:2] == ["sh", "-c"] and "command -v nbgen" in argv[2]:
            return Script(argv[-1] + "\n")
        if argv[-1:] == ["version"]:
            return Script("nbgen 1.0.0\n")
        if "rx" in argv[1:2]:
            return Script(stdout=fixture_text("nbgen", "1.0.0", "rx-native.out"), hang=True)
        if "tx" in argv[1:2]:
            return Script(stdout=fixture_text("nbgen", "1.0.0", "tx-two-threads.out"), runtime=2.0)
        return Script()
    return respond


def test_packet_point_attaches_the_receiver_first_then_releases_the_generator(tmp_path, monkeypatch):
    from nicbench.studies.packets import runner as packets
    monkeypatch.setattr(packets.nbgen, "binary", lambda: "/opt/nbgen")
    plan = parse_plan(PACKET_PLAN)
    hosts = fake_hosts(plan, {"gen": packet_host("01", "gen"), "sink": packet_host("02", "sink")}, direct=1)
    hosts.transport("gen").files["/sys/devices/system/cpu/online"] = "0-1\n"
    r = PacketRunner(plan, hosts)
    pre = r.preflight()
    assert pre.meta["generator"] == "gen" and pre.meta["receiver"] == "sink" and pre.warnings == ()
    [spec] = trials(plan)
    out = r.trial(env(tmp_path), spec, tmp_path / spec.trial_id)
    [rx] = hosts.transport("sink").spawned
    [tx] = hosts.transport("gen").spawned
    assert rx.argv[1] == "rx" and not rx.gated and tx.argv[1] == "tx" and tx.gated
    assert rx.spawned_at <= tx.released_at                  # counting before the first frame leaves
    assert rx.signals and rx.poll() is not None             # the receiver stopped after the drain
    assert tx.argv[tx.argv.index("--cpus") + 1] == "0,1"    # one CPU per generator thread
    # the frames carry both ports' MACs (from ip -j link), built by nicbench
    frame = bytes.fromhex(out.record.meta["ports"][0]["frame_hex"])
    assert frame[:6] == bytes.fromhex("020000000002") and frame[6:12] == bytes.fromhex("020000000001")
    assert out.record.status == "ok", out.record.error
    assert sum(s.value for s in out.samples if s.metric == "pkt.received") == 19987728     # every count since attach
    assert out.record.meta["tx"]["pk0"]["sent"] == 23425216


def test_packet_preflight_names_an_attached_xdp_program_and_missing_privileges(monkeypatch):
    from nicbench.studies.packets import runner as packets
    monkeypatch.setattr(packets.nbgen, "binary", lambda: "/opt/nbgen")
    plan = parse_plan(PACKET_PLAN)
    attached = ('[{"ifname": "pk0", "address": "02:00:00:00:00:02", "mtu": 1500, "num_rx_queues": 2, '
                '"xdp": {"mode": 1, "prog": {"id": 7, "name": "xdp_other"}}}]')
    sink = packet_host("02", "sink")
    no_caps = lambda argv: Script("CapEff:\t0000000000000000\n") if argv[:2] == ["cat", "/proc/self/status"] \
        else (Script(attached) if argv[:3] == ["ip", "-j", "-d"] else sink(argv))  # noqa: E731
    hosts = fake_hosts(plan, {"gen": packet_host("01", "gen"), "sink": no_caps}, direct=1)
    with pytest.raises(PreflightError) as e:
        PacketRunner(plan, hosts).preflight()
    msg = e.value.message
    assert "sink: pk0 already has an XDP program attached, id 7 (xdp_other" in msg
    assert "sink: nbgen needs CAP_NET_ADMIN, CAP_BPF, CAP_PERFMON" in msg


def test_a_preflight_error_says_preflight_once_and_names_the_study():
    """It printed "nicbench: preflight: preflight: ..." (the kind, then a where that repeated it)."""
    plan = parse_plan(HTTPS_PLAN)
    missing = lambda argv: Script(returncode=127) if argv[0] in ("nginx", "wrk") else Script()  # noqa: E731
    with pytest.raises(PreflightError) as e:
        HttpsRunner(plan, fake_hosts(plan, {"srv": missing, "c1": missing, "c2": missing})).preflight()
    line = e.value.one_line()
    assert line.startswith("nicbench: preflight: https study: srv: nginx is not installed")
    assert line.count("preflight") == 1


def test_https_preflight_catches_an_open_files_limit_too_low_for_the_connections():
    """The audit's case: ulimit -n 150 with 200 wrk connections surfaced as
    nginx's 'Too many open files' mid-point."""
    plan = parse_plan(HTTPS_PLAN.replace("connections = [4]", "connections = [4, 400]"))

    def limited(n):
        def respond(argv):
            if argv[:2] == ["sh", "-c"] and argv[2].startswith("ulimit"):
                return Script(f"{n}\n")
            return https_client(argv) if argv[0] in ("wrk", "ping") else https_server(argv)
        return respond
    hosts = fake_hosts(plan, {"srv": limited(150), "c1": limited(150), "c2": limited(100000)})
    with pytest.raises(PreflightError) as e:
        HttpsRunner(plan, hosts).preflight()
    msg = e.value.message
    assert "c1: open-files limit is 150, wrk needs 264 for 200 connections" in msg and "c2:" not in msg
    assert "srv: open-files limit is 150, nginx needs 864 for 400 connections" in msg
    assert "ulimit -n" in e.value.hint


def test_fio_reports_on_another_clock_than_the_start_stamp_fail_the_point(tmp_path):
    """Both are the host's clock; if they disagree by seconds, the bytes
    would land in the wrong window, so the point fails and says so."""
    plan = parse_plan(STORAGE_PLAN)
    text = fixture_text("fio", "3.33", "nbd_read_status_interval.json")

    def initiator(argv: list[str]) -> Script:
        if argv[0] == "fio" and argv[1] != "--enghelp" and argv[1] != "--version":
            return Script(render=fio_released_at(text, connect=7.0), runtime=4.1)
        return storage_initiator(argv)
    hosts = fake_hosts(plan, {"srv": storage_target, "c1": initiator, "c2": initiator})
    r = StorageRunner(plan, hosts)
    r.preflight()
    e = env(tmp_path)
    r.start(e, tmp_path / "storage")
    out = r.trial(e, trials(plan)[0], tmp_path / "t")
    r.stop(e, tmp_path / "storage")
    assert out.record.status == "failed" and "outside the 4 s it was given" in out.record.error
    assert "timestamp_ms" in out.record.error


def test_trafgens_full_send_buffer_panic_fails_the_point_with_what_to_do(tmp_path):
    """The recorded SSH-lab panic (trafgen 0.6.8, ring flush EAGAIN, exit 1): the
    point fails naming trafgen's words, and its hint says what to do."""
    plan = parse_plan(PACKET_PLAN.replace('engines = ["nbgen"]', 'engines = ["trafgen"]'))
    err = fixture_text("trafgen", "0.6.8", "ssh_flush_eagain.err")
    out_text = fixture_text("trafgen", "0.6.8", "ssh_flush_eagain.out").replace("@@nicbench-begin\n", "")
    sink = packet_host("02", "sink")

    def gen(argv: list[str]) -> Script:
        if argv[:2] == ["trafgen", "-v"]:
            return Script("\ntrafgen 0.6.8 (Flutternozzle), Git id: (none)\n")
        if argv[:1] == ["timeout"] and "trafgen" in argv:
            return Script(stdout=out_text, stderr="".join(ln + "\n" for ln in err.splitlines()
                                                          if not ln.startswith("nicbench-")),
                          returncode=1, runtime=1.5, launcher=True)
        return packet_host("01", "gen")(argv)
    hosts = fake_hosts(plan, {"gen": gen, "sink": sink}, direct=1)
    hosts.transport("gen").files["/sys/devices/system/cpu/online"] = "0-1\n"
    r = PacketRunner(plan, hosts)
    r.preflight()
    [spec] = trials(plan)
    rec = r.trial(env(tmp_path), spec, tmp_path / spec.trial_id).record
    assert rec.status == "failed", rec.error
    assert "trafgen on pk0 exited 1" in rec.error and "Flushing TX_RING failed" in rec.error, rec.error
    assert "send buffer is full" in rec.error and "study.rate" in rec.error, rec.error
