"""engine = "nbperf" in the TCP study against the fake transport: no root, the
engine's recorded outputs (tests/fixtures/nbperf/1.0.0, see its README)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nicbench.core.errors import PreflightError
from nicbench.hosts.fake import FakeTransport, Script
from nicbench.plan import parse_plan
from nicbench.plan.matrix import trials
from nicbench.run.kit import PointEnv
from nicbench.studies.tcp.engines.nbperf import NbperfContext, preflight, run_trial
from nicbench.tools import nbperf
from nicbench.tools.base import ToolInfo

FIX = Path(__file__).parent.parent / "fixtures" / "nbperf" / "1.0.0"
ADDR = {"srv": "198.18.0.1", "c1": "198.18.0.2", "c2": "198.18.0.3"}
PLAN = """
name = "f"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[hosts.c2]
role = "client"
[study]
engine = "nbperf"
io_sizes = ["128K"]
connections = [%d]
duration = 2
omit = 0
trim = 0.25
timeout_margin = 1
"""


def text(name: str) -> str:
    p = FIX / name
    return p.read_text() if p.exists() else ""


def env(tmp_path: Path) -> PointEnv:
    return PointEnv(rel=lambda p: str(Path(p).relative_to(tmp_path)))


def engine(cases: dict[str, str]):
    """Client hosts' fake transports running the recorded server of ``cases[host]``,
    and the study server's, running the recorded client of the case its --server names."""
    by_addr = {ADDR[h]: case for h, case in cases.items()}

    def client(argv: list[str]) -> Script:
        case = by_addr[argv[argv.index("--server") + 1]]
        rc = 0 if not text(f"{case}.client.err") else 1
        return Script(stdout=text(f"{case}.client.out"), stderr=text(f"{case}.client.err"), returncode=rc)
    servers = {h: FakeTransport(h, lambda argv, c=c: Script(stdout=text(f"{c}.server.out"),
                                                            stderr=text(f"{c}.server.err")))
               for h, c in cases.items()}
    return {"srv": FakeTransport("srv", client), **servers}


def ctx_for(connections: int, cases: dict[str, str]) -> tuple[NbperfContext, list]:
    plan = parse_plan(PLAN % connections)
    ctx = NbperfContext(plan.study, "srv", list(plan.clients), engine(cases), ADDR,
                        {h: "/x/nbperf" for h in ADDR}, ToolInfo("nbperf", (1, 0, 0), "nbperf 1.0.0"))
    return ctx, trials(plan)


def test_a_point_is_the_receivers_intervals_with_the_achieved_start(tmp_path):
    ctx, [spec] = ctx_for(3, {"c1": "tcp-tx"})
    ctx = NbperfContext(ctx.study, "srv", ["c1"], ctx.transports, ADDR, ctx.exes, ctx.tool)
    rec, samples, raws = run_trial(ctx, env(tmp_path), spec, tmp_path / spec.trial_id)
    assert rec.status == "ok", rec.error
    c = nbperf.parse_client(text("tcp-tx.client.out"))
    assert rec.meta["start_skew_s"] == pytest.approx(c.summary.start_skew, abs=2e-6)
    assert rec.meta["totals"]["c1:5201"]["peer_rx_bytes"] == c.summary.tx_bytes
    got = sum(s.value for s in samples if s.metric == "tcp.bytes" and s.tag("side") == "receiver")
    assert got == c.summary.peer_rx_bytes
    # both ends' argv: one absolute start, the server bound to the client host's address, stopping by itself
    [cli] = ctx.transports["srv"].spawned  # type: ignore[attr-defined]
    assert cli.argv[cli.argv.index("--start") + 1] == f"{rec.meta['start_at']:.6f}"
    assert "--conns" in cli.argv and cli.argv[cli.argv.index("--conns") + 1] == "3"
    [srv] = ctx.transports["c1"].spawned  # type: ignore[attr-defined]
    assert {"--until", "--clients", "--bind"} <= set(srv.argv)
    assert {r.role for r in raws} == {"engine-client", "engine-server"}


def test_a_pair_whose_server_was_killed_is_lost_and_the_point_is_partial(tmp_path):
    ctx, [spec] = ctx_for(4, {"c1": "tcp-tx", "c2": "killed-server"})
    rec, samples, _ = run_trial(ctx, env(tmp_path), spec, tmp_path / spec.trial_id)
    assert rec.status == "partial", rec.error
    assert "c2:5201 lost" in rec.error and "Connection reset by peer" in rec.error
    assert set(rec.meta["lost"]) == {"c2:5201"}
    assert {s.tag("host") for s in samples if s.metric == "tcp.bytes"} == {"c1"}


def test_every_pair_lost_fails_the_point(tmp_path):
    ctx, [spec] = ctx_for(4, {"c1": "killed-server", "c2": "killed-server"})
    rec, samples, _ = run_trial(ctx, env(tmp_path), spec, tmp_path / spec.trial_id)
    assert rec.status == "failed" and "Connection reset by peer" in rec.error
    assert not [s for s in samples if s.metric == "tcp.bytes"]


def _host(name: str, *, version: str = "nbperf 1.0.0 (protocol 1)", hard: str = "524288",
          missing: bool = False) -> FakeTransport:
    def respond(argv: list[str]) -> Script:
        if argv[0] == "sh" and "command -v nbperf" in argv[2]:
            return Script(stdout="/x/nbperf\n")
        if argv[0] == "sh" and "ulimit -Hn" in argv[2]:
            return Script(stdout=hard + "\n")
        if argv[-1] == "version":
            return Script(returncode=127) if missing else Script(stdout=version + "\n")
        return Script()          # ping
    return FakeTransport(name, respond)


def test_preflight_finds_nbperf_on_every_host_and_names_every_problem():
    plan = parse_plan(PLAN % 2000)
    ts = {"srv": _host("srv"), "c1": _host("c1", hard="1024"), "c2": _host("c2", missing=True)}
    with pytest.raises(PreflightError) as e:
        preflight(plan.study, "srv", ["c1", "c2"], ts, ADDR)  # type: ignore[arg-type]
    msg = e.value.message
    assert "c2: nbperf is not installed" in msg and "make -C native/nbperf" in msg
    assert "c1: open-files limit is 1024, the nbperf server needs 1064" in msg
    ts = {"srv": _host("srv", version="nbperf 0.9.0"), "c1": _host("c1"), "c2": _host("c2")}
    with pytest.raises(PreflightError, match="srv: nbperf 0.9.0 is older than 1.0.0"):
        preflight(plan.study, "srv", ["c1", "c2"], ts, ADDR)  # type: ignore[arg-type]
    ctx, pre = preflight(plan.study, "srv", ["c1", "c2"], {h: _host(h) for h in ADDR}, ADDR)  # type: ignore[arg-type]
    assert ctx.exes == {h: "/x/nbperf" for h in ADDR} and ctx.tool.version == (1, 0, 0)
    assert pre.meta["engine"] == "nbperf" and pre.meta["nbperf_send"] == "send"
