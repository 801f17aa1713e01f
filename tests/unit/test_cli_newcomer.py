"""What a newcomer meets on the command line: options that would be ignored
are refused naming the one that applies, usage errors follow --json, run ids
are printed whole, --help says where plans run and what the exit codes mean,
and a run is in the archive every command reads wherever it was started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import partial

import pytest
from starlette.testclient import TestClient
from test_session_fake import PLAN, opener, responder

import nicbench.cli.run as cli_run
from conftest import FIXTURES, ROOT, run_cli
from nicbench.cli.options import plan_store
from nicbench.hosts.fake import FakeTransport
from nicbench.run.session import execute
from nicbench.store.location import parse_store
from nicbench.web.app import create_app


def nb(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nicbench.cli.main", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("args, flag, needle", [
    (["--speed", "40G", "--frame-size", "64"], "--frame-size", "hint: add --proto frames"),
    (["--speed", "10G", "--record", "4K"], "--record", "give --proto tls1.2 or tls1.3"),
    (["--speed", "10G", "--io-size", "4K"], "--io-size", "--proto nbd"),
    (["--speed", "10G", "--op", "write"], "--op", "--proto nbd"),
    (["--speed", "10G", "--proto", "frames", "--vlan"], "--vlan", "any VLAN tag included"),
    (["--speed", "10G", "--proto", "frames", "--mtu", "9000"], "--mtu", "--frame-size"),
    (["--speed", "10G", "--proto", "fcoe", "--io-size", "4K", "--ip", "6"], "--ip", "--proto fcoe ceiling"),
    (["--speed", "10G", "--proto", "udp", "--no-timestamps"], "--no-timestamps", "--proto udp ceiling"),
])
def test_linerate_refuses_an_option_its_protocol_would_ignore(args, flag, needle):
    p = nb("linerate", *args)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith(f"nicbench: bad input: {flag}: applies to --proto ") and needle in p.stderr


def test_linerate_takes_the_options_its_protocol_uses():
    p = nb("linerate", "--speed", "40G", "--proto", "frames", "--frame-size", "64")
    assert p.returncode == 0 and "59.524 Mpps" in p.stdout
    assert nb("linerate", "--speed", "10G", "--proto", "tls1.3", "--record", "4K", "--no-timestamps").returncode == 0
    assert nb("linerate", "--speed", "10G", "--proto", "nbd", "--io-size", "4K", "--op", "write").returncode == 0


def test_other_commands_refuse_options_that_would_be_ignored():
    # (import's --role is not here: it fills in for files that do not say which end wrote them)
    p = nb("lab", "up", ROOT / "examples" / "seed000-tcp-multiclient.toml", "--clients", "2")
    assert p.returncode == 2 and "--clients: sets the clients of a lab built without a plan" in p.stderr
    p = nb("facts", "local", "--lab", "x")
    assert p.returncode == 2 and "--lab: names the lab of the hosts given" in p.stderr
    p = nb("tune", "audit", "local", "--lab", "x")
    assert p.returncode == 2 and "--lab: names the lab whose hosts to tune" in p.stderr


@pytest.mark.parametrize("args, where", [
    (["--json", "linerate", "--speed", "10G", "--proto", "quic"], "--proto"),
    (["linerate", "--json", "--speed", "10G", "--proto", "quic"], "--proto"),
    (["--json", "frobnicate"], None),
    (["--json", "check"], "PLAN"),
])
def test_usage_errors_follow_json(args, where):
    p = nb(*args)
    assert p.returncode == 2 and "Usage:" in p.stderr          # the person still reads the usage
    err = json.loads(p.stdout)["error"]
    assert err["kind"] == "usage" and err["exit_code"] == 2 and err["where"] == where and err["message"]


def test_tune_profiles_json():
    data = json.loads(nb("tune", "profiles", "--json").stdout)
    by = {p["name"]: p for p in data}
    assert by["stock"]["audit_only"] is True and by["throughput"]["settings"]
    assert all({"kind"} <= set(s) for s in by["throughput"]["settings"])
    assert json.loads(nb("--json", "tune", "profiles").stdout) == data


def test_runs_prints_whole_run_ids_in_a_pipe_and_a_narrow_terminal(tmp_path):
    f = FIXTURES / "iperf3" / "3.12" / "tx_p2.json"
    ids = []
    for name in ("a-plan-name-long-enough-to-fill-the-forty-characters", "short"):
        p = nb("--json", "import", "iperf3", f, "--name", name, "--store", tmp_path)
        ids.append(json.loads(p.stdout)["run_id"])
    assert len(ids[0]) > 60
    for env in ({"COLUMNS": "60"}, {"COLUMNS": "200"}):
        out = nb("runs", "--store", tmp_path, env=env).stdout
        for run_id in ids:
            assert any(line.split()[:1] == [run_id] for line in out.splitlines()), out
    # and in a terminal 70 columns wide (script gives the command a pty)
    cmd = f"stty cols 70; {sys.executable} -m nicbench.cli.main runs --store {tmp_path}"
    tty = subprocess.run(["script", "-qc", cmd, "/dev/null"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert all(run_id in tty.stdout for run_id in ids), tty.stdout


def test_help_says_where_plans_run_and_lists_exit_codes():
    top = nb("--help").stdout
    assert "real hosts over SSH" in top and "embedded lab" in top
    codes = top[top.index("Exit codes:"):]
    for code, word in (("0", "ok"), ("2", "bad input"), ("3", "preflight"), ("4", "lab"), ("5", "tool"),
                       ("6", "store"), ("7", "some points failed or partial"), ("130", "interrupted")):
        assert any(ln.split()[:1] == [code] and word in ln for ln in codes.splitlines()), code
    assert "_NICBENCH_COMPLETE=bash_source" in top
    start = top[top.index("Start:"):top.index("Exit codes:")]
    for cmd in ("init --list", "check PLAN", "run PLAN", "setup", "import FILE...", "compare A B"):
        assert f"nicbench {cmd}" in start, cmd
    run = nb("run", "--help").stdout
    assert "real hosts over SSH" in run and "embedded lab" in run


def test_shell_completion_is_click_s():
    script = nb(env={"_NICBENCH_COMPLETE": "bash_source"}).stdout
    assert "_nicbench_completion()" in script
    p = nb(env={"_NICBENCH_COMPLETE": "bash_complete", "COMP_WORDS": "nicbench linerate --pr", "COMP_CWORD": "2"})
    assert "--proto" in p.stdout


@pytest.mark.parametrize("cmd", [["init"], ["setup"], ["schema"], ["compare"], ["runs"], ["lab", "down"]])
def test_help_of_the_new_and_changed_commands(cmd):
    p = nb(*cmd, "--help")
    assert p.returncode == 0 and p.stdout.startswith("Usage: nicbench " + " ".join(cmd))


def test_store_paths_in_messages_are_absolute_wherever_the_command_started(tmp_path):
    """A relative --store (or the default archive in the XDG data dir) is named in
    full in every message and JSON field, so a message is usable from anywhere."""
    f = FIXTURES / "iperf3" / "3.12" / "tx_p2.json"
    env = {**{k: v for k, v in os.environ.items() if k != "NICBENCH_STORE"}, "XDG_DATA_HOME": str(tmp_path / "xdg")}

    def here(*args: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "nicbench.cli.main", *map(str, args)], capture_output=True,
                              text=True, cwd=tmp_path, timeout=120, env=env)

    assert here("runs").stdout.strip() == f"no runs in {tmp_path / 'xdg' / 'nicbench' / 'archive.sqlite'}"
    imp = json.loads(here("--json", "import", f, "--store", "rel").stdout)
    [run] = imp["runs"]
    assert run["run_dir"] == str(tmp_path / "rel" / "runs" / run["run_id"])
    rep = here("report", run["run_id"], "--store", "rel")
    index = tmp_path / "rel" / "runs" / run["run_id"] / "report" / "index.html"
    assert rep.returncode == 0 and rep.stdout.strip() == f"report: {index}"
    listed = json.loads(here("--json", "runs", "--store", "rel").stdout)
    assert [r["run_dir"] for r in listed] == [str(tmp_path / "rel" / "runs" / run["run_id"])]
    miss = here("report", "nope", "--store", "rel")
    assert miss.returncode == 6 and f"{tmp_path / 'rel' / 'archive.sqlite'}" in miss.stderr


def test_a_run_goes_into_the_archive_every_command_reads_wherever_it_started(tmp_path, monkeypatch, capsys):
    """A plan's [output] dir places the run's directory; the run itself is in
    the user's archive, so runs, report latest and serve find it from any
    working directory (they used to find nothing: the plan had made an
    archive of its own in the directory the run was started from)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("NICBENCH_STORE", raising=False)
    _hosts, open_fake = opener({h: FakeTransport(h, responder) for h in ("srv", "c1", "c2")})
    monkeypatch.setattr(cli_run, "execute", partial(execute, hosts_for=open_fake))
    started, elsewhere = tmp_path / "checkout", tmp_path / "elsewhere"
    started.mkdir()
    elsewhere.mkdir()
    plan = started / "fake.toml"
    plan.write_text(PLAN + '\n[output]\ndir = "nicbench-runs"\n')
    monkeypatch.chdir(started)
    code, out, err = run_cli(capsys, "--json", "run", plan.name, "--no-report")
    assert code == 0, err
    ran = json.loads(out)
    archive = tmp_path / "xdg" / "nicbench" / "archive.sqlite"
    assert ran["store"] == str(archive)
    assert ran["run_dir"] == str(started / "nicbench-runs" / ran["run_id"])     # where the plan put it
    assert not (started / "nicbench-runs" / "archive.sqlite").exists()           # no archive of its own

    for cwd in (started, elsewhere):
        monkeypatch.chdir(cwd)
        code, out, err = run_cli(capsys, "--json", "runs")
        assert code == 0, err
        assert [(r["run_id"], r["run_dir"]) for r in json.loads(out)] == [(ran["run_id"], ran["run_dir"])]
        code, out, err = run_cli(capsys, "report", "latest")
        assert code == 0, err
        assert out.strip() == f"report: {started / 'nicbench-runs' / ran['run_id'] / 'report' / 'index.html'}"
        app = create_app(parse_store(None), token="t", allowed_hosts=["127.0.0.1"], cache_root=tmp_path / "cache")
        with TestClient(app, base_url="http://127.0.0.1:8787") as client:
            page = client.get("/")
            assert page.status_code == 200 and ran["run_id"] in page.text
            assert client.get(f"/run/{ran['run_id']}").status_code == 200


def test_explicit_stores_beat_a_plan_s_output_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("NICBENCH_STORE", raising=False)
    user = tmp_path / "xdg" / "nicbench"
    assert plan_store(None, None) == parse_store(str(user))
    loc = plan_store(None, "out")
    assert (loc.target, loc.runs_root) == (str(user / "archive.sqlite"), tmp_path / "out")
    assert plan_store("mine", "out") == parse_store(str(tmp_path / "mine"))
    monkeypatch.setenv("NICBENCH_STORE", str(tmp_path / "env"))
    assert plan_store(None, "out") == parse_store(str(tmp_path / "env"))
