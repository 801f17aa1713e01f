"""``nicbench ab`` from the command line on fake hosts: two profiles that
change nothing the figures feel give "no difference" (exit 9), stored and
judged, with its page; bad profiles are one line with nothing started."""

from __future__ import annotations

import json

import pytest
from test_ab_session import AB_PLAN, BIG, STOCK, TunableHost
from test_session_fake import opener, responder

from conftest import run_cli as nb
from nicbench.cli import ab as ab_cli
from nicbench.store.ab import ab_result
from nicbench.store.archive import Archive


@pytest.fixture
def fake_lab(tmp_path, monkeypatch):
    """The CLI's A/B on fake hosts (the lab cannot be built without root)."""
    monkeypatch.setenv("NICBENCH_RESTORE_DIR", str(tmp_path / "restore"))
    ts = {h: TunableHost(h, responder) for h in ("srv", "c1", "c2")}
    ts["srv"].files.update({"/proc/stat": "", "/proc/softirqs": ""})
    _, open_fake = opener(ts)
    real = ab_cli.execute_ab
    monkeypatch.setattr(ab_cli, "execute_ab", lambda *a, **k: real(*a, **k, hosts_for=open_fake))
    plan = tmp_path / "plan.toml"
    plan.write_text(AB_PLAN)
    (tmp_path / "big.toml").write_text(BIG)
    return ts, plan


def test_two_profiles_the_figures_do_not_feel_are_no_difference_exit_9(capsys, tmp_path, fake_lab):
    ts, plan = fake_lab
    store = tmp_path / "arch"
    code, out, err = nb(capsys, "ab", str(plan), "--b", str(tmp_path / "big.toml"), "--rounds", "2", "--json",
                        "--store", str(store))
    assert code == 9, err
    doc = json.loads(out.split("\n{\"error\"")[0])
    assert doc["b_won"] is False and doc["profiles"] == {"A": "stock", "B": str(tmp_path / "big.toml")}
    assert [(p["point"], p["outcome"], len(p["a"]), len(p["b"])) for p in doc["points"]] == [
        ("tx/c4/io128K", "no difference", 2, 2), ("tx/c4/io64K", "no difference", 2, 2)]
    assert "Welch" in doc["method"] and doc["summary"].startswith("B did not win: better at 0, worse at 0")
    assert "B (" in err and "did not beat A (stock): no point better at this confidence" in err
    assert all(h.sysctl == STOCK for h in ts.values())
    with Archive.open(store) as a:
        row = ab_result(a, "latest")
        assert row.status == "done" and row.b_won is False and row.result["points"][0]["outcome"] == "no difference"
        assert a.row(row.run_a).status == a.row(row.run_b).status == "done"
    page = doc["page"]
    html = open(page).read()
    assert "B did not win" in html and row.run_a in html and "Welch" in html and "What each side set" in html


@pytest.mark.parametrize("b, what", [
    ("nosuch", "no tuning profile 'nosuch'"),
    ("missing.toml", "cannot read the profile"),
    ("bad.toml", "sysctrl"),
])
def test_a_profile_that_cannot_be_read_is_one_line_and_nothing_starts(capsys, tmp_path, fake_lab, b, what):
    ts, plan = fake_lab
    (tmp_path / "bad.toml").write_text('[[settings]]\nkind = "sysctrl"\nkey = "net.ipv4.tcp_rmem"\nvalue = 1\n')
    arg = b if b == "nosuch" else str(tmp_path / b)
    code, out, err = nb(capsys, "ab", str(plan), "--b", arg, "--store", str(tmp_path / "arch"))
    assert code == 2 and err.count("\n") == 1 and what in err and "--b" in err
    assert all(h.log == [] and h.commands == [] for h in ts.values())
    assert not (tmp_path / "arch").exists()


def test_the_dashboard_lists_an_ab_and_shows_its_judgement_escaped(capsys, tmp_path, fake_lab):
    from starlette.testclient import TestClient

    from nicbench.store.location import parse_store
    from nicbench.web.app import create_app
    ts, plan = fake_lab
    evil = tmp_path / "<script>alert(1)<" / "b.toml"
    evil.parent.mkdir()
    evil.write_text(BIG)
    store = tmp_path / "arch"
    code, out, err = nb(capsys, "ab", str(plan), "--b", str(evil), "--rounds", "2", "--no-report", "--store",
                        str(store))
    assert code == 9, err
    app = create_app(parse_store(store), token="t", allowed_hosts=["127.0.0.1"], cache_root=tmp_path / "cache")
    with Archive.open(store) as a:
        row = ab_result(a, "latest")
    with TestClient(app, base_url="http://127.0.0.1:8787") as client:
        listing = client.get("/ab")
        assert listing.status_code == 200 and row.ab_id in listing.text and "B did not win" in listing.text
        page = client.get(f"/ab/{row.ab_id}")
        assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
        text = page.text
        assert "<script>alert" not in text and "&lt;script&gt;alert(1)&lt;" in text
        assert f'href="/run/{row.run_a}"' in text and "tx/c4/io128K" in text and "no difference" in text
        assert "Welch" in text and "<svg" in text
        assert client.get("/ab/nope").status_code == 404
