"""``nicbench trend --plan NAME``: every point of a plan, its change points
tied to what changed, and the CI gate -- on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import time
from xml.etree import ElementTree

from test_archive_partial import run_once
from test_session_fake import responder

from conftest import run_cli as nb
from nicbench.analysis.verdict import LIMITS
from nicbench.records import Fact, HostFacts, RunInfo
from nicbench.registry import VIEWS
from nicbench.report.catalogue import summarise
from nicbench.store.archive import Archive, PointSummary, RunFilter
from nicbench.store.names import new_run_id
from nicbench.store.writer import RunWriter

POINTS = ("tx/c1/io64K", "rx/c1/io64K", "tx/c1/io4K")
T0 = time.time() - 100 * 3600


def facts(rmem: int, kernel: str) -> list[HostFacts]:
    return [HostFacts(h, role, 1.0, (Fact("kernel", kernel), Fact("sysctl.net.core.rmem_max", rmem),
                                     Fact("cpu.mhz", 2400.0 + k), Fact("hostname", h)))
            for k, (h, role) in enumerate((("srv", "server"), ("c1", "client")))]


def add_run(a: Archive, i: int, values: dict[str, float], *, profile: str = "stock", rmem: int = 4194304,
            kernel: str = "6.1.0", verdict: str | None = "cpu", partial: tuple[str, ...] = (),
            source: str = "plan", with_facts: bool = True, plan: str = "nightly") -> str:
    info = RunInfo(new_run_id(plan), plan, "tcp", T0 + i * 3600, f'name = "{plan}"\n', source, "0.9",
                   {"tuning": {"profile": profile}, "engine": "iperf3", "engine_version": "3.12"})
    w = RunWriter.create(a, info, total=0)
    if with_facts:
        w.write_facts(facts(rmem, kernel))
    w.finish("done")
    a.write_summary(info.run_id, [PointSummary(p, {}, 1, 0, {"gbps": v, "cpu_s_per_gb": 1.0 / v},
                                               survivors_only=p in partial, verdict=verdict)
                                  for p, v in values.items()], "gbps", "test")
    return info.run_id


def level(i: int, low: bool) -> dict[str, float]:
    """The two 64K points drop to 40 % under the small buffers; io4K (CPU-bound) does not move."""
    wobble = (0.0, 0.1, -0.1, 0.05)[i % 4]
    big = (4.0 if low else 9.5) + wobble
    return {"tx/c1/io64K": big, "rx/c1/io64K": big - 0.3, "tx/c1/io4K": 2.0 + wobble / 2}


def seed_profile_change(a: Archive, recover: bool) -> list[str]:
    ids = []
    for i in range(12 if recover else 9):
        small = 6 <= i < 9
        ids.append(add_run(a, i, level(i, small), profile="small-buffers" if small else "stock",
                           rmem=212992 if small else 4194304, kernel="6.1.0" if i < 3 else "6.6.0",
                           verdict="window" if small else "cpu"))
    return ids


def test_a_profile_that_limits_two_points_is_named_at_both_change_points(store_url, capsys):
    with Archive.open(store_url) as a:
        ids = seed_profile_change(a, recover=True)
    code, out, err = nb(capsys, "trend", "--plan", "nightly", "--json", "--check", "--store", store_url)
    assert code == 0, err                         # the newest runs recovered: nothing to fail
    doc = json.loads(out)
    assert doc["metric"] == "gbps" and doc["study"] == "tcp" and doc["runs"] == 12 and doc["flagged"] == []
    pts = {p["point"]: p for p in doc["points"]}
    assert pts["tx/c1/io4K"]["change_points"] == [] and pts["tx/c1/io4K"]["status"] == "steady"
    for p in ("tx/c1/io64K", "rx/c1/io64K"):
        drop, back = pts[p]["change_points"]
        assert (drop["run_after"], drop["run_before"], drop["direction"]) == (ids[6], ids[5], "regression")
        assert (back["run_after"], back["direction"]) == (ids[9], "improvement")
        assert drop["step_pct"] < -50 and drop["before"]["n"] == 6 and drop["after"]["n"] == 3
        changes = {(c["what"], c["before"], c["after"]): c["hosts"] for c in drop["changes"]}
        # the run's profile and the sysctl it set; not the kernel (changed at run 3, no step there),
        # not cpu.mhz (differs between any two runs), not hostname (identity)
        assert changes == {("tuning profile", "stock", "small-buffers"): [],
                           ("sysctl.net.core.rmem_max", "4194304", "212992"): ["srv", "c1"]}
        assert (drop["verdicts_before"], drop["verdicts_after"]) == ({"cpu": 6}, {"window": 3})
        assert pts[p]["status"] == "improvement"          # the recovery is among the newest 5 runs
    # ranked over the plan: how many of the four change points each change coincides with
    assert {(r["what"], r["before"], r["after"]): r["change_points"] for r in doc["ranking"]} == {
        ("tuning profile", "stock", "small-buffers"): 2, ("sysctl.net.core.rmem_max", "4194304", "212992"): 2,
        ("tuning profile", "small-buffers", "stock"): 2, ("sysctl.net.core.rmem_max", "212992", "4194304"): 2}
    # one screen of text says the same
    code, out, _ = nb(capsys, "trend", "--plan", "nightly", "--store", store_url)
    assert code == 0
    assert f"regression at run {ids[6]}" in out and "tuning profile stock -> small-buffers" in out
    assert "verdict: cpu (6) -> window (3)" in out and len(out.splitlines()) < 40


def test_check_fails_on_a_regression_at_the_newest_run_with_junit(store_url, capsys, tmp_path):
    with Archive.open(store_url) as a:
        ids = seed_profile_change(a, recover=False)
    junit = tmp_path / "trend.xml"
    code, out, err = nb(capsys, "trend", "--plan", "nightly", "--check", "--junit", junit, "--store", store_url)
    assert code == 8, err
    assert "regressed at the newest run at 2 of 3 points of plan nightly" in err and len(err.strip().splitlines()) <= 2
    suite = ElementTree.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("3", "2")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    fail = cases["tx/c1/io64K"].find("failure")
    assert fail is not None and f"regression at run {ids[6]}" in fail.get("message", "")
    assert "tuning profile stock -> small-buffers" in fail.get("message", "")
    assert "sysctl.net.core.rmem_max 4194304 -> 212992 on srv, c1" in fail.get("message", "")
    assert cases["tx/c1/io4K"].find("failure") is None
    # lower is better: CPU seconds per GB rose at the same run, a regression too
    code, out, err = nb(capsys, "trend", "--plan", "nightly", "--metric", "cpu_s_per_gb", "--check", "--json",
                        "--store", store_url)
    doc, end = json.JSONDecoder().raw_decode(out)      # then the error, as JSON too
    assert code == 8 and set(doc["flagged"]) == {"tx/c1/io64K", "rx/c1/io64K"}
    assert json.loads(out[end:])["error"]["exit_code"] == 8
    # --recent: a change point three runs back is not "at the newest run" with --recent 2
    code, _, err = nb(capsys, "trend", "--plan", "nightly", "--check", "--recent", "2", "--store", store_url)
    assert code == 0, err


def test_partial_newest_imported_and_nothing_recorded(store_url, capsys):
    with Archive.open(store_url) as a:
        for i in range(6):
            add_run(a, i, {"tx/c1/io64K": 9.5 + (0.1 if i % 2 else 0), "rx/c1/io64K": 9.0 + (0.1 if i % 2 else 0)})
        # a step with nothing recorded changing, then an imported run with no facts at the same level
        for i in range(6, 9):
            add_run(a, i, {"tx/c1/io64K": 6.0 + (0.1 if i % 2 else 0), "rx/c1/io64K": 9.0 + (0.1 if i % 2 else 0)})
        # the newest: rx lost a client (its figure is the survivors'): never judged, even far below
        add_run(a, 9, {"tx/c1/io64K": 6.05, "rx/c1/io64K": 3.0}, partial=("rx/c1/io64K",))
        imported = add_run(a, 10, {"tx/c1/io64K": 2.0, "rx/c1/io64K": 9.05}, source="import", with_facts=False)
        add_run(a, 11, {"tx/c1/io64K": 2.1, "rx/c1/io64K": 3.0}, partial=("rx/c1/io64K",))
    code, out, err = nb(capsys, "trend", "--plan", "nightly", "--json", "--check", "--store", store_url)
    doc, _ = json.JSONDecoder().raw_decode(out)
    pts = {p["point"]: p for p in doc["points"]}
    assert pts["rx/c1/io64K"]["status"] == "partial" and pts["rx/c1/io64K"]["change_points"] == []
    assert [s["survivors_only"] for s in pts["rx/c1/io64K"]["series"]][-3:] == [True, False, True]
    first, second = pts["tx/c1/io64K"]["change_points"]
    assert first["nothing_recorded_changed"] and first["changes"] == []
    assert second["run_after"] == imported and second["unrecorded"] == [f"{imported} (imported)"]
    assert ("source", "plan", "import") in {(c["what"], c["before"], c["after"]) for c in second["changes"]}
    assert code == 8 and doc["flagged"] == ["tx/c1/io64K"], err
    code, out, _ = nb(capsys, "trend", "--plan", "nightly", "--store", store_url)
    assert "nothing recorded changed" in out and f"host facts not recorded for {imported} (imported)" in out


def test_plan_errors_are_one_line(tmp_path, capsys):
    store = str(tmp_path / "a.sqlite")
    with Archive.open(store) as a:
        add_run(a, 0, {"tx/c1/io64K": 1.0})
        assert a.studies_of(RunFilter(name="nightly")) == ["tcp"]
    code, _, err = nb(capsys, "trend", "--store", store)
    assert code == 2 and "no --point and no --plan" in err
    code, _, err = nb(capsys, "trend", "--plan", "nope", "--store", store)
    assert code == 2 and "no run of plan 'nope'" in err
    code, _, err = nb(capsys, "trend", "--plan", "nightly", "--metric", "bogus", "--store", store)
    assert code == 2 and "no metric 'bogus'" in err
    code, out, err = nb(capsys, "trend", "--plan", "nightly", "--json", "--check", "--store", store)
    assert code == 0 and json.loads(out)["points"][0]["status"] == "not enough history"


def test_a_summarised_run_stores_each_points_verdict(tmp_path):
    """The verdicts a trend says before and after a change point are the
    study's own, stored when the run is summarised (catalogue schema 5)."""
    store = tmp_path / "arch"
    run_id = run_once(store, responder)
    with Archive.open(store) as a:
        view = summarise(a, run_id, VIEWS)
        stored = {p.point: p.verdict for p in a.points_of(run_id)}
        assert stored and set(stored.values()) <= set(LIMITS)
        assert stored == {p.point: p.verdict.limit for p in view.points if p.verdict}
        assert {r.point: r.verdict for r in a.plan_trend("gbps", RunFilter())} == stored
