"""An A/B through the session's machinery on fake hosts whose sysctls are a
dict (no root, no lab): ABBA order alternating over rounds, each repeat
under its side's profile and restored after it, two runs and one A/B row
in the archive, and every exit path -- a profile a host lacks, a value a
kernel refuses, Ctrl-C mid-point -- leaving nothing changed."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from test_session_fake import PLAN, opener, responder

from nicbench.core.errors import Interrupted, PreflightError
from nicbench.hosts.fake import FakeTransport
from nicbench.hosts.transport import CommandResult
from nicbench.plan import parse_plan
from nicbench.run.ab import Side, execute_ab, schedule
from nicbench.store.ab import ab_result
from nicbench.store.archive import Archive
from nicbench.store.reader import open_run_dir
from nicbench.studies.tcp.runner import TcpRunner
from nicbench.tuning import audit as audit_mod
from nicbench.tuning import knobs
from nicbench.tuning.profile import load

RMEM = "/proc/sys/net/ipv4/tcp_rmem"
FIN = "/proc/sys/net/ipv4/tcp_fin_timeout"
STOCK = {RMEM: "4096 131072 6291456", FIN: "60"}
AB_PLAN = PLAN.replace("repeats = 2", "repeats = 1").replace('io_sizes = ["128K"]', 'io_sizes = ["128K", "64K"]')


@dataclass
class TunableHost(FakeTransport):
    """A fake host whose /proc/sys and restore files are dicts: the few shell
    commands tuning sends (tuning/audit.py, knobs.py, restorefile.py) played
    as the host would; every change logged with what was in force."""

    sysctl: dict[str, str] = field(default_factory=lambda: dict(STOCK))
    refuse: dict[str, str] = field(default_factory=dict)      # path -> a value the kernel refuses
    log: list[str] = field(default_factory=list)

    def run(self, argv, *, timeout=30.0, input=None):
        a = list(argv)
        if a[:2] == ["sh", "-c"] and a[2] == audit_mod._STATES:
            out = "".join(f"{p}\trw\t{self.sysctl[p]}\n" if p in self.sysctl else f"{p}\tmissing\t\n" for p in a[4:])
            return self._done(a, 0, out)
        if a[:2] == ["sh", "-c"] and a[2] == knobs._WRITE:
            value, path = a[4], a[5]
            if self.refuse.get(path) == value:
                return self._done(a, 1, "", "sh: write error: Invalid argument")
            self.sysctl[path] = value
            self.log.append(f"{path.rsplit('/', 1)[1]}={value}")
            return self._done(a, 0)
        if a[:2] == ["sh", "-c"] and a[2].startswith('[ -e "$1" ] || exit 3; cat "$1"'):
            return self._done(a, 0, self.files[a[4]]) if a[4] in self.files else self._done(a, 3)
        if a[:2] == ["sh", "-c"] and a[2].startswith("umask 077;"):
            self.files[a[4]] = input or ""
            return self._done(a, 0)
        if a[:2] == ["rm", "-f"]:
            for p in a[2:]:
                self.files.pop(p, None)
            return self._done(a, 0)
        return super().run(argv, timeout=timeout, input=input)

    def _done(self, a, rc, out="", err=""):
        self.commands.append(a)
        return CommandResult(self.host, tuple(a), rc, out, err, 0.0)

    def read_text(self, path):
        if path in self.sysctl:
            return self.sysctl[path] + "\n"
        return super().read_text(path)


class Order:
    def __init__(self, stop_at: int | None = None, hosts=None):
        self.slots: list[str] = []
        self.stop_at, self.hosts = stop_at, hosts or {}

    def begin(self, ab_id, total, runs):
        self.total = total

    def slot_start(self, side, spec):
        # what is in force while the point runs
        self.slots.append(f"{side} {spec.point} r{spec.repeat} rmem={self.hosts['srv'].sysctl[RMEM].split()[2]}")
        if self.stop_at is not None and len(self.slots) == self.stop_at:
            raise KeyboardInterrupt

    def slot_end(self, side, rec, samples):
        pass

    def end(self):
        pass


BIG = """description = "big buffers"
[[settings]]
kind = "sysctl"
key = "net.ipv4.tcp_rmem"
value = "4096 131072 33554432"
"""


@pytest.fixture
def hosts(tmp_path, monkeypatch):
    monkeypatch.setenv("NICBENCH_RESTORE_DIR", str(tmp_path / "restore"))
    ts = {h: TunableHost(h, responder) for h in ("srv", "c1", "c2")}
    ts["srv"].files.update({"/proc/stat": "", "/proc/softirqs": ""})
    return ts


def sides(tmp_path, b_text=BIG):
    f = tmp_path / "big.toml"
    f.write_text(b_text)
    return Side("A", "stock", load("stock")), Side("B", str(f), load(str(f)))


def test_the_schedule_is_abba_alternating_over_rounds_point_by_point():
    got = [(s, t.point, t.repeat, t.trial_id) for s, t in schedule([("p1", {}), ("p2", {})], "tcp", 3)]
    assert [x[:3] for x in got] == [("A", "p1", 0), ("B", "p1", 0), ("B", "p1", 1), ("A", "p1", 1),
                                    ("A", "p1", 2), ("B", "p1", 2),
                                    ("A", "p2", 0), ("B", "p2", 0), ("B", "p2", 1), ("A", "p2", 1),
                                    ("A", "p2", 2), ("B", "p2", 2)]
    assert [t for s, _, _, t in got if s == "B"] == [f"t{i:04d}" for i in range(1, 7)]   # each run numbers its own


def test_each_repeat_runs_under_its_sides_profile_into_two_runs_and_one_ab_row(tmp_path, hosts):
    _, open_fake = opener(hosts)
    prog = Order(hosts=hosts)
    out = execute_ab(parse_plan(AB_PLAN), AB_PLAN, sides(tmp_path), runner=TcpRunner, rounds=2, store=tmp_path,
                     progress=prog, hosts_for=open_fake)
    assert out.status == "done" and {s: (r.ok, r.failed) for s, r in out.runs.items()} == {"A": (4, 0), "B": (4, 0)}
    assert prog.slots == ["A tx/c4/io128K r0 rmem=6291456", "B tx/c4/io128K r0 rmem=33554432",
                          "B tx/c4/io128K r1 rmem=33554432", "A tx/c4/io128K r1 rmem=6291456",
                          "A tx/c4/io64K r0 rmem=6291456", "B tx/c4/io64K r0 rmem=33554432",
                          "B tx/c4/io64K r1 rmem=33554432", "A tx/c4/io64K r1 rmem=6291456"]
    for h in hosts.values():
        assert h.sysctl == STOCK and not any(p.startswith(str(tmp_path / "restore")) for p in h.files)
        # once to check it and read the facts under it, then once per B repeat: each applied and restored
        assert h.log == ["tcp_rmem=4096 131072 33554432", "tcp_rmem=4096 131072 6291456"] * 5
    with Archive.open(tmp_path) as a:
        row = ab_result(a, out.ab_id)
        assert (row.run_a, row.run_b, row.profile_a, row.rounds, row.status) == (
            out.runs["A"].run_id, out.runs["B"].run_id, "stock", 2, "done")
    r = open_run_dir(out.runs["B"].run_dir)
    m = r.meta()
    assert m["meta.tuning"]["applied"] and m["meta.tuning"]["profile"].endswith("big.toml")
    assert m["meta.ab_side"] == "B" and m["ab"]["id"] == out.ab_id
    r.close()


def test_a_profile_a_host_lacks_stops_the_ab_before_anything_changes(tmp_path, hosts):
    del hosts["c2"].sysctl[FIN]
    _, open_fake = opener(hosts)
    b = BIG + '[[settings]]\nkind = "sysctl"\nkey = "net.ipv4.tcp_fin_timeout"\nvalue = 30\n'
    with pytest.raises(PreflightError) as e:
        execute_ab(parse_plan(AB_PLAN), AB_PLAN, sides(tmp_path, b), runner=TcpRunner, rounds=2, store=tmp_path,
                   hosts_for=open_fake)
    line = e.value.one_line()
    assert "\n" not in line and "side B's profile cannot be applied, so nothing was changed" in line
    assert "c2 sysctl net.ipv4.tcp_fin_timeout: unsupported" in line
    assert all(h.log == [] for h in hosts.values())
    with Archive.open(tmp_path) as a:
        assert a.runs(include_hidden=True) == []


def test_a_value_a_kernel_refuses_is_restored_everywhere_before_any_point(tmp_path, hosts):
    hosts["c1"].refuse[RMEM] = "4096 131072 33554432"
    _, open_fake = opener(hosts)
    with pytest.raises(PreflightError, match="tuning profile not in force"):
        execute_ab(parse_plan(AB_PLAN), AB_PLAN, sides(tmp_path), runner=TcpRunner, rounds=2, store=tmp_path,
                   hosts_for=open_fake)
    assert all(h.sysctl == STOCK for h in hosts.values())
    assert hosts["srv"].log == ["tcp_rmem=4096 131072 33554432", "tcp_rmem=4096 131072 6291456"]


def test_ctrl_c_in_a_b_repeat_restores_and_keeps_what_finished(tmp_path, hosts):
    _, open_fake = opener(hosts)
    prog = Order(stop_at=3, hosts=hosts)      # in the second B repeat
    with pytest.raises(Interrupted, match="A/B interrupted by the user after 2 of 8 repeats; finished repeats"):
        execute_ab(parse_plan(AB_PLAN), AB_PLAN, sides(tmp_path), runner=TcpRunner, rounds=2, store=tmp_path,
                   progress=prog, hosts_for=open_fake)
    assert all(h.sysctl == STOCK for h in hosts.values())
    with Archive.open(tmp_path) as a:
        row = ab_result(a, "latest")
        assert row.status == "interrupted" and row.b_won is None
        assert (a.row(row.run_a).trials_ok, a.row(row.run_b).trials_ok) == (1, 1)
        assert a.row(row.run_b).status == "interrupted"
