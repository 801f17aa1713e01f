"""``nicbench import`` as a user meets it: detection said per file, forcing,
grouping into points and repeats, --together, one run per kind, every error
path (one line, exit 2, nothing in the store), provenance and raw copies,
and ``nicbench compare`` between an imported run and a lab run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from test_session_fake import opener, responder

from conftest import FIXTURES, fixture_text
from conftest import import_json as imp
from conftest import run_cli as nb
from nicbench.api import load_run
from nicbench.hosts.fake import FakeTransport
from nicbench.importers import parse_file
from nicbench.importers.headline import headline
from nicbench.plan import parse_plan
from nicbench.run.session import execute
from nicbench.store.reader import open_run_dir
from nicbench.studies.tcp.runner import TcpRunner

IMP = FIXTURES / "import"
V3 = FIXTURES / "iperf3" / "3.12"
V2 = FIXTURES / "iperf2" / "2.1.8"


def empty(store: Path) -> bool:
    """Nothing at all in the store, not even a hidden half-written run."""
    return not store.exists() or not any(store.iterdir())


def variant(src: Path, dest: Path, *, port_shift: int = 0, time_shift: int = 0) -> Path:
    """A copy of an iperf3 report as another client run beside it (other
    ports) or later (another start time): what grouping decides on."""
    d = json.loads(src.read_text())
    for c in d["start"]["connected"]:
        c["local_port"] += port_shift
    d["start"]["timestamp"]["timesecs"] += time_shift
    dest.write_text(json.dumps(d))
    return dest


def test_detects_each_format_and_says_which(capsys, tmp_path):
    code, out, err = nb(capsys, "import", "--store", tmp_path / "s", IMP / "iperf3/ext/cp_tx_omit3.json",
                        IMP / "iperf3-text/ext/cp_text.txt")
    assert code == 0, err
    assert f"{IMP / 'iperf3/ext/cp_tx_omit3.json'}: iperf3-json (detected), iperf3 3.9, client -> tcp study" in out
    assert f"{IMP / 'iperf3-text/ext/cp_text.txt'}: iperf3-text (detected)" in out
    doc = imp(capsys, tmp_path / "s2", IMP / "fio/local/randread_4k.json")
    [f] = doc["files"]
    assert (f["format"], f["format_forced"], f["tool"], f["version"], f["study"]) == \
        ("fio-json", False, "fio", "3.33", "storage")
    assert f["headline"][0]["value"] == pytest.approx(100667392 / 1.007)


def test_forcing_a_format_and_the_old_positional_tool_name(capsys, tmp_path):
    doc = imp(capsys, tmp_path / "a", "--as", "iperf2", "--role", "client", IMP / "iperf2/ext/iperf2_syno4862.csv")
    assert doc["files"][0]["format"] == "iperf2-csv" and doc["files"][0]["format_forced"]
    doc = imp(capsys, tmp_path / "b", "iperf3", V3 / "tx_p2.json")           # nicbench import iperf3 FILE
    assert doc["files"][0]["format_forced"] and doc["runs"][0]["points"][0]["point"] == "tx/c2/io128K"
    meta = open_run_dir(Path(doc["run_dir"])).meta()
    assert meta["meta.imported"][0]["format_forced"] is True
    code, _, err = nb(capsys, "import", "--store", tmp_path / "c", "--as", "fio", V3 / "tx_p2.json")
    assert code == 2 and "fio" in err and empty(tmp_path / "c")
    code, _, err = nb(capsys, "import", "--store", tmp_path / "c", "--as", "nosuch", V3 / "tx_p2.json")
    assert code == 2 and "unknown format 'nosuch'" in err and empty(tmp_path / "c")
    code, _, err = nb(capsys, "import", "--store", tmp_path / "c", "--as", "wrk", "iperf3", V3 / "tx_p2.json")
    assert code == 2 and "given twice" in err


def test_files_of_one_point_in_parallel_and_repeats_told_apart_by_their_clocks(capsys, tmp_path):
    a = V3 / "tx_p2.json"
    b = variant(a, tmp_path / "second_client.json", port_shift=100)       # same time, other connections
    later = variant(a, tmp_path / "later.json", time_shift=600)            # the same test ten minutes on
    doc = imp(capsys, tmp_path / "s", a, b, later)
    [run] = doc["runs"]
    view = load_run(Path(run["run_dir"]))
    t = {tr.trial_id: tr for tr in view.trials}
    assert [(tr.point, tr.repeat) for tr in view.trials] == [("tx/c4/io128K", 0), ("tx/c2/io128K", 0)]
    # two clients in parallel: their figures add up; the later file is a point of 2 connections alone
    assert t["t0001"].gbps == pytest.approx(2 * t["t0002"].gbps, rel=1e-6)
    # the same file twice in time is a repeat of one point
    doc = imp(capsys, tmp_path / "r", a, later)
    view = load_run(Path(doc["run_dir"]))
    assert [(tr.point, tr.repeat) for tr in view.trials] == [("tx/c2/io128K", 0), ("tx/c2/io128K", 1)]
    assert doc["runs"][0]["points"][0]["repeats"] == 2


def test_together_forces_one_point(capsys, tmp_path):
    doc = imp(capsys, tmp_path / "s", V3 / "tx_p2.json", V3 / "rx_p2.json")
    assert len(doc["runs"][0]["points"]) == 2
    doc = imp(capsys, tmp_path / "t", "--together", V3 / "tx_p2.json", V3 / "rx_p2.json")
    [p] = doc["runs"][0]["points"]
    view = load_run(Path(doc["run_dir"]))
    [t] = view.trials
    # IO sizes differ (128K, 64K): the point carries none; tx from one file, rx from the other
    assert p["point"] == "bidir/c4" and set(t.receiver) == {"tx", "rx"}


def test_files_of_different_kinds_become_one_run_each(capsys, tmp_path):
    code, out, err = nb(capsys, "import", "--store", tmp_path / "s", V3 / "tx_p2.json",
                        IMP / "fio/local/randread_4k.json", IMP / "wrk/ext/wrk_readme.txt")
    assert code == 0, err
    assert "the files hold 3 kinds of results: one run each (tcp, storage, https)" in out
    doc = imp(capsys, tmp_path / "j", V3 / "tx_p2.json", IMP / "fio/local/randread_4k.json")
    assert [r["study"] for r in doc["runs"]] == ["tcp", "storage"] and len(doc["run_ids"]) == 2
    assert "run_id" not in doc
    names = sorted(p.name for p in (tmp_path / "j" / "runs").iterdir())
    assert len(names) == 2 and all(n.endswith(("-imported-tcp", "-imported-storage")) or "-imported-" in n
                                   for n in names)


def test_provenance_and_raw_copies(capsys, tmp_path):
    files = [IMP / "iperf3/local/client_tx_p2_noserver.json", IMP / "iperf3/local/server_tx_p2.json"]
    doc = imp(capsys, tmp_path / "s", *files)
    r = open_run_dir(Path(doc["run_dir"]))
    prov = r.meta()["meta.imported"]
    assert [p["name"] for p in prov] == [str(f) for f in files]
    for p, f in zip(prov, files, strict=True):
        data = f.read_bytes()
        assert p["path"] == str(f.absolute()) and p["size"] == len(data)
        assert p["sha256"] == hashlib.sha256(data).hexdigest()
        assert (p["format"], p["tool"], p["version"]) == ("iperf3-json", "iperf3", "3.12")
        assert p["points"] == ["tx/c2/io128K"] and isinstance(p["notes"], list) and p["dropped"] == []
    assert [p["role"] for p in prov] == ["client", "server"]
    raws = r.raw_outputs()
    assert len(raws) == 2
    for raw, f in zip(raws, files, strict=True):
        assert (Path(doc["run_dir"]) / raw.path).read_bytes() == f.read_bytes() and raw.tool == "iperf3"
    [t] = r.trials()
    assert t.meta["imported"] == [str(f) for f in files]
    r.close()


def test_a_partial_file_says_what_was_dropped(capsys, tmp_path):
    # iperf3 3.12 printed "-nan" for one retransmit count: read as unknown, said so
    code, out, err = nb(capsys, "import", "--store", tmp_path / "s", V3 / "tx_p2_nan.json")
    assert code == 0, err
    assert "tx_p2_nan.json: dropped: damaged report: 1 non-number value(s) (-nan) were read as null" in out
    doc = imp(capsys, tmp_path / "j", V3 / "tx_p2_nan.json")
    assert doc["files"][0]["dropped"] == open_run_dir(Path(doc["run_dir"])).meta()["meta.imported"][0]["dropped"]
    assert doc["files"][0]["dropped"]
    # a client stopped mid-test: iperf3 writes its error into the report; what ran is kept, and said
    d = json.loads((V3 / "tx_p2.json").read_text())
    d["error"] = "interrupt - the client has terminated"
    (tmp_path / "stopped.json").write_text(json.dumps(d))
    code, out, err = nb(capsys, "import", "--store", tmp_path / "t", tmp_path / "stopped.json")
    assert code == 0 and "dropped: iperf3 reported an error: interrupt - the client has terminated" in out


@pytest.mark.parametrize("files, needle", [
    ([IMP / "iperf3/ext/cp_empty.txt"], "empty file"),
    ([V2 / "client_refused.csv"], "empty file"),
    ([V2 / "client_refused.stderr"], "format not recognised"),
    ([IMP / "iperf3/ext/cp_damaged.json"], "truncated or damaged"),
    ([IMP / "iperf3/ext/cp_error.json"], "the test never ran"),
    ([IMP / "iperf3/ext/cp_3.6_bytes_n.json"], "receiver reported 0 bytes"),
    ([IMP / "wrk/ext/wrk_issue497.txt"], "0 requests completed"),
    ([IMP / "wrk/ext/wrk_issue256.txt"], "more than the point's error budget"),
    (["--role", "server", V2 / "server_n.csv"], "over 0 s"),
    ([V2 / "server_n.csv"], "--role client"),
    ([V2 / "client_udp.csv"], "a UDP point needs the receiver's report"),
    # netperf UDP_STREAM whose receiver got nothing (netperf's own doc, -m 65000 -S 32768)
    ([IMP / "netperf/ext/netperf_doc_udp_stream_zero.txt"], "the receiver reported 0 bytes"),
    ([V3 / "tx_p2.json", IMP / "iperf3/ext/cp_damaged.json"], "cp_damaged.json"),     # one bad file: nothing
    ([V3 / "tx_p2.json", V3 / "tx_p2.json"], "given twice"),
    ([V3 / "tx_omit.json", "missing.json"], "missing.json: cannot read"),
    ([FIXTURES / "import"], "is a directory"),
    ([], "no files given"),
])
def test_errors_are_one_line_exit_2_and_nothing_written(capsys, tmp_path, files, needle):
    store = tmp_path / "store"
    code, out, err = nb(capsys, "import", "--store", store, *files)
    assert code == 2 and needle in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and "hint:" in err
    assert empty(store)


def test_binary_and_copied_files_are_refused(capsys, tmp_path):
    blob = tmp_path / "capture.pcap"
    blob.write_bytes(b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00" + bytes(64))
    code, _, err = nb(capsys, "import", "--store", tmp_path / "s", blob)
    assert code == 2 and "binary file" in err and empty(tmp_path / "s")
    copy = tmp_path / "copy.json"
    copy.write_bytes((V3 / "tx_p2.json").read_bytes())
    code, _, err = nb(capsys, "import", "--store", tmp_path / "s", V3 / "tx_p2.json", copy)
    assert code == 2 and "same content as" in err and empty(tmp_path / "s")


def test_errors_name_the_command_that_makes_a_usable_file(capsys, tmp_path):
    code, _, err = nb(capsys, "import", "--store", tmp_path / "s", IMP / "iperf3/ext/cp_error.json")
    assert "run the client with -J --get-server-output" in err
    code, _, err = nb(capsys, "import", "--store", tmp_path / "s", V2 / "server_n.csv", "--role", "server")
    assert "run it with -t SECONDS instead of -n" in err


def test_iperf2_udp_client_csv_is_sender_side_only(capsys, tmp_path):
    """tests/fixtures/iperf2/2.1.8/client_udp.csv: a UDP client's -y C has no server report lines
    (the last line's datagram count is -1): what was sent, 26220390 B over 0.0-2.0 s."""
    p = parse_file((V2 / "client_udp.csv").read_text(), "client_udp.csv")
    assert p.kind == "udp" and p.role == "client"
    assert headline(p) == ("sender bit/s", pytest.approx(26220390 * 8 / 2.0), "bit/s")


PLAN = """
name = "lab"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[study]
directions = ["tx"]
io_sizes = ["128K"]
connections = [2]
duration = 3
omit = 0
trim = 0.25
repeats = 2
timeout_margin = 1
"""


def test_compare_an_imported_run_with_a_lab_run(capsys, tmp_path):
    """A lab run on fake hosts whose iperf3 printed tx_p2.json, against the
    same report imported by hand: one point in common, factor about 1."""
    store = tmp_path / "store"
    ts = {h: FakeTransport(h, responder) for h in ("srv", "c1")}
    _, open_fake = opener(ts)
    lab = execute(parse_plan(PLAN), PLAN, runner=TcpRunner, store=store, hosts_for=open_fake)
    assert (lab.ok, lab.failed) == (2, 0)
    (tmp_path / "tx_p2.json").write_text(fixture_text("iperf3", "3.12", "tx_p2.json"))
    doc = imp(capsys, store, tmp_path / "tx_p2.json")
    code, out, err = nb(capsys, "compare", lab.run_dir.name, doc["run_id"], "--store", store, "--json")
    assert code == 0, err
    cmp = json.loads(out)
    [p] = cmp["points"]
    assert p["point"] == "tx/c2/io128K" and (p["n_a"], p["n_b"]) == (2, 1)
    # the lab trims 0.25 s at both ends, the import uses the whole test: close, not equal
    assert p["factor"] == pytest.approx(1.0, abs=0.03)
    code, out, err = nb(capsys, "compare", lab.run_dir.name, doc["run_id"], "--store", store)
    assert code == 0 and "tx/c2/io128K" in out


def test_role_fills_in_where_a_file_does_not_say_and_never_overrides_it(capsys, tmp_path):
    """iperf 2 -e text, both ends of one -P 2 test: the server's file says
    "Server listening", so --role client does not make it a client's."""
    doc = imp(capsys, tmp_path / "s", "--role", "client", IMP / "iperf2-text/local/client_tx_p2_e.txt",
              IMP / "iperf2-text/local/server_tx_e.txt")
    assert [f["role"] for f in doc["files"]] == ["client", "server"]
    [p] = doc["runs"][0]["points"]
    # the server's own whole-test total, [SUM] 0.0000-2.0243 sec 2.12 GBytes (its intervals, 882 MBytes over
    # 0-1 s and 1.22 GBytes over 1-2 s, are the timeline; the 0.0243 s past them is one more sample)
    assert p["point"] == "tx/c2" and p["value"] == pytest.approx(2.12 * 2**30 * 8 / 2.0243 / 1e9)
    assert "tx/c2" not in doc["runs"][0]["basis"]            # receiver-side, from intervals
