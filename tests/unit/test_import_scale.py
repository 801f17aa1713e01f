"""A long import stays linear and lean (issue 33 item 6: 115,000 intervals
never finished).  Operation counts and shared objects, never timings; the
times and peak memory of a 200 MB import are bench/import_scale.py's."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import random
import re
from pathlib import Path

from conftest import FIXTURES
from conftest import run_cli as nb
from nicbench.analysis import aggregate as agg
from nicbench.analysis import counters as counters_mod
from nicbench.cli import imports as cli_imports
from nicbench.core.errors import InputError, ToolError
from nicbench.importers import bounds, iperf3_json, parse_file
from nicbench.importers import group as group_mod
from nicbench.importers.adapt import ImportedRun, ImportedTrial, retag, retagged, retagger
from nicbench.importers.flows import flow_point
from nicbench.importers.group import group
from nicbench.importers.write import records
from nicbench.records import Sample, make_tags
from nicbench.registry import VIEWS
from nicbench.store import writer
from nicbench.store.archive import Archive
from nicbench.studies.tcp import analysis as tcp_analysis
from nicbench.tools import iperf3
from nicbench.tools.base import FlowInterval, FlowRow

V3 = FIXTURES / "iperf3" / "3.12"


def long_report(n: int) -> str:
    """tests/fixtures/iperf3/3.12/tx_p2.json with its second interval repeated
    ``n`` times, one second on each time, client and server (as the bench)."""
    d = json.loads((V3 / "tx_p2.json").read_text())
    srv = d["server_output_json"]
    for doc in (d, srv):
        iv = doc["intervals"][1]
        c0 = iv["sum"]["start"]
        ivs = []
        for k in range(n):
            x = json.loads(json.dumps(iv))
            for st in [*x["streams"], x["sum"]]:
                st["start"] += k - c0
                st["end"] += k - c0
            ivs.append(x)
        doc["intervals"] = ivs
        for i, st in enumerate(doc["end"]["streams"]):
            total = sum(x["streams"][i]["bytes"] for x in ivs)
            for side in ("sender", "receiver"):
                st[side].update(start=0, end=float(n), seconds=float(n), bytes=total)
    d["start"]["test_start"]["duration"] = n
    return json.dumps(d, indent="\t")


class _Counting:
    """A compiled pattern that counts the calls of each method."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern, self.calls = pattern, {}

    def __getattr__(self, name: str):
        real = getattr(self.pattern, name)

        def counted(*a, **k):
            self.calls[name] = self.calls.get(name, 0) + 1
            return real(*a, **k)
        return counted


def test_a_clean_report_is_not_searched_whole_for_c_nan_tokens(monkeypatch):
    # the repair's regex took 3 s per 27 MB; a report that reads as plain JSON needs none
    counting = _Counting(iperf3._NON_NUMBER)
    monkeypatch.setattr(iperf3, "_NON_NUMBER", counting)
    text = (V3 / "tx_p2.json").read_text()
    d, damage = iperf3.load_json(text)
    assert damage == () and d["start"]["version"] == "iperf 3.12"
    assert "subn" not in counting.calls and "finditer" not in counting.calls
    # a damaged one still takes the repair and names it
    d, damage = iperf3.load_json(re.sub(r'"retransmits":\s*\d+', '"retransmits":\t-nan', text, count=1))
    assert counting.calls.get("subn") == 1 and "nan" in damage[0]


def test_a_long_files_samples_share_their_tag_sets():
    # one tags tuple per sample was most of a 200 MB import's memory and much of its time
    p = parse_file(long_report(300), "long.json")
    assert len(p.samples) >= 900
    assert len({id(s.tags) for s in p.samples}) <= 8
    fp = flow_point(group([p])[0], "tcp")          # retagged per process: still shared
    assert len({id(s.tags) for s in fp.samples}) <= 8
    assert {s.tags for s in fp.samples} == {make_tags(**dict(s.tags)) for s in fp.samples}


def test_tags_that_compare_equal_but_read_differently_stay_apart():
    # 1, 1.0 and True are one dict key but three tags: the shared tag sets are keyed by type too
    s = Sample("", "tcp.bytes", 1.0, "bytes", 0, 1, make_tags(host="a"))
    assert [retagger(streams=v)(s).tag("streams") for v in (1, 1.0, True)] == ["1", "1.0", "True"]
    assert [retag(s, streams=v).tag("streams") for v in (1, 1.0, True)] == ["1", "1.0", "True"]


def count_tag_reads(monkeypatch) -> list[int]:
    """Sample.tag counted from now on: the one-element list holds the count."""
    reads = [0]
    real = Sample.tag

    def counted(self, name, default=None):
        reads[0] += 1
        return real(self, name, default)
    monkeypatch.setattr(Sample, "tag", counted)
    return reads


def test_the_analysis_reads_each_tag_set_once_not_each_sample(monkeypatch):
    p = parse_file(long_report(200), "long.json")
    reads = count_tag_reads(monkeypatch)
    samples = [s for s in p.samples if s.metric == "tcp.bytes"]
    agg.aggregate(samples, direction="tx")
    agg.timeline_problems(samples, direction="tx")
    agg.processes_with_data(samples, direction="tx")
    assert agg.directions_in(samples) == ["tx"]
    assert reads[0] < 100, f"{reads[0]} tag reads for {len(samples)} samples"


def test_sample_rows_write_each_tag_set_as_json_once(monkeypatch):
    calls = 0
    real = writer.json.dumps

    def counted(*a, **k):
        nonlocal calls
        calls += 1
        return real(*a, **k)
    monkeypatch.setattr(writer.json, "dumps", counted)
    tags = make_tags(host="c1", proc=0, direction="tx", side="receiver")
    rows = writer.sample_rows(1, [Sample("t0001", "tcp.bytes", 1.0, "bytes", i, i + 1, tags) for i in range(500)])
    assert len(rows) == 500 and calls == 1
    assert json.loads(rows[-1][-1]) == dict(tags) and rows[-1][2] == 499


def test_a_large_import_says_its_stages_on_a_terminal_only(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(cli_imports, "LARGE", 0)
    monkeypatch.setattr(cli_imports, "_tty", lambda: True)
    code, out, err = nb(capsys, "import", "--store", tmp_path / "a", V3 / "tx_p2.json")
    assert code == 0, err
    lines = err.strip().splitlines()
    assert [x.split("): ", 1)[1].split(" ")[0] for x in lines] == ["parsing", "making", "writing", "storing", "done"]
    assert all(x.startswith("nicbench import (1 file(s), 0 MB): ") for x in lines)
    monkeypatch.setattr(cli_imports, "_tty", lambda: False)            # a pipe, a log: nothing
    code, out, err = nb(capsys, "import", "--store", tmp_path / "b", V3 / "tx_p2.json")
    assert code == 0 and err == ""


def test_an_import_analyses_its_run_once(capsys, tmp_path, monkeypatch):
    # the check before writing and the archive's summary after read one analysis:
    # analysing the run again from the archive was a sixth of a 200 MB import
    view = VIEWS["tcp"]
    calls = 0
    real = type(view).analyse

    def counted(self, run):
        nonlocal calls
        calls += 1
        return real(self, run)
    monkeypatch.setattr(type(view), "analyse", counted)
    code, out, err = nb(capsys, "import", "--json", "--store", tmp_path, V3 / "tx_p2.json")
    assert code == 0, err
    assert calls == 1
    doc = json.loads(out)
    with Archive.open(tmp_path) as a:             # the decisions and figures are stored all the same
        row = a.row(doc["run_id"])
        assert row.stored_status == "done" and row.trials_ok == 1 and row.headline_value
        assert [p.point for p in a.points_of(doc["run_id"])] == [f["point"] for f in doc["runs"][0]["points"]]


def test_counters_and_retransmits_read_nothing_per_throughput_sample(monkeypatch):
    p = parse_file(long_report(200), "long.json")
    reads = count_tag_reads(monkeypatch)
    keyed = 0
    real_series = counters_mod._series

    def series(samples, key):
        nonlocal keyed
        samples = list(samples)
        keyed += len(samples)
        return real_series(samples, key)
    monkeypatch.setattr(counters_mod, "_series", series)
    assert counters_mod.counters(p.samples, (0.0, 200.0)) is None      # a file has no host counters
    assert reads[0] == 0 and keyed == 0    # the series key no throughput sample (3 x 340,000 calls at 200 MB)
    retr = list(tcp_analysis._measured_values(p.samples, "tcp.retransmits"))
    assert len(retr) >= 200 and reads[0] < 10, f"{reads[0]} tag reads for {len(retr)} retransmit samples"


def test_an_import_runs_without_the_cycle_collector_and_gives_it_back(capsys, tmp_path, monkeypatch):
    # each full collection walked a 200 MB report's millions of live objects again: a fifth of its time
    seen = []
    real = cli_imports.parse_file

    def parse(*a, **k):
        seen.append(gc.isenabled())
        return real(*a, **k)
    monkeypatch.setattr(cli_imports, "parse_file", parse)
    assert gc.isenabled()
    code, out, err = nb(capsys, "import", "--store", tmp_path / "a", V3 / "tx_p2.json")
    assert code == 0, err
    assert seen == [False] and gc.isenabled()
    code, out, err = nb(capsys, "import", "--store", tmp_path / "b", V3 / "nope.json")      # an error too
    assert code != 0 and gc.isenabled()
    gc.disable()                   # off before: off after
    try:
        code, out, err = nb(capsys, "import", "--store", tmp_path / "c", V3 / "rx_p2.json")
        assert code == 0 and not gc.isenabled()
    finally:
        gc.enable()


def test_a_whole_report_reads_as_the_json_module_reads_it_or_goes_its_way():
    # msgspec builds the same objects in a third of the time; what it reads differently, it refuses
    for f in sorted(V3.glob("*.json")):
        text = f.read_text()
        try:
            want = iperf3.load_json(text)
        except ToolError:
            continue
        fast = iperf3._whole_report(text)
        if fast is not None:
            assert want == (fast, ()) and json.dumps(fast) == json.dumps(want[0]), f.name
    text = (V3 / "tx_p2.json").read_text()
    assert iperf3._whole_report(text) == json.loads(text)
    assert iperf3._whole_report("\n \r\n" + text + "\n\t") == json.loads(text)
    for other in ("warning: x\n" + text,                  # text around the report: the json module's way
                  text + "\nwarning: x\n",
                  "  " + text,                           # not at a line start
                  re.sub(r'"retransmits":\s*\d+', '"retransmits":\tNaN', text, count=1),
                  re.sub(r'"bytes":\s*\d+', '"bytes": 1e400', text, count=1),
                  '{"start": {}, "x": "\\ud800"}',
                  '{"a": 1}'):                            # JSON, not a report
        assert iperf3._whole_report(other) is None
    # duplicate keys (--bidir in some versions): the last, as the json module
    assert iperf3._whole_report('{"start": {}, "a": 1, "a": 2}') == {"start": {}, "a": 2}
    # numbers past 64 bits stay exact integers, as in the json module
    assert iperf3._whole_report('{"start": {"n": 123456789012345678901234567890}}')["start"]["n"] == \
        123456789012345678901234567890


def test_flow_rows_are_flow_intervals_as_tuples():
    assert FlowRow._fields == tuple(f.name for f in dataclasses.fields(FlowInterval))
    assert FlowRow._field_defaults == {f.name: f.default for f in dataclasses.fields(FlowInterval)
                                       if f.default is not dataclasses.MISSING}
    n = 0
    for f in sorted(V3.glob("*.json")):
        try:
            d = iperf3.load_json(f.read_text())[0]
        except ToolError:
            continue
        ts = d["start"].get("test_start") or {}
        for doc, server in ((d, False), (d.get("server_output_json"), True)):
            if not isinstance(doc, dict) or not doc.get("intervals"):
                continue
            kw = dict(is_server=server, omit=float(ts.get("omit") or 0),
                      duration=float(ts["duration"]) if ts.get("duration") else None, by_peer=server)
            rows = iperf3.flow_rows(doc["intervals"], **kw)
            assert all(type(r) is FlowRow for r in rows)
            assert iperf3._intervals(doc["intervals"], **kw) == [FlowInterval(*r) for r in rows]
            assert [r._asdict() for r in rows] == [dataclasses.asdict(FlowInterval(*r)) for r in rows]
            n += len(rows)
    assert n > 100


class _Reads(dict):
    """A dict that notes every key read of it (get, [] and in)."""

    def __init__(self, d: dict, seen: set[str]) -> None:
        super().__init__(d)
        self.seen = seen

    def __getitem__(self, k):
        self.seen.add(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        self.seen.add(k)
        return super().get(k, default)

    def __contains__(self, k):
        self.seen.add(k)
        return super().__contains__(k)


def _fixture_reports():
    for f in sorted(V3.glob("*.json")):
        try:
            yield f, iperf3.load_json(f.read_text())[0]
        except ToolError:
            continue


def test_a_lean_report_keeps_every_key_the_interval_parse_reads():
    ivs_read, streams_read, sums_read = set(), set(), set()
    for _, d in _fixture_reports():
        ts = d["start"].get("test_start") or {}
        for doc, server in ((d, False), (d.get("server_output_json"), True)):
            if not isinstance(doc, dict) or not isinstance(doc.get("intervals"), list):
                continue
            ivs = [_Reads({**iv, "streams": [_Reads(st, streams_read) for st in iv.get("streams", [])],
                           **({"sum": _Reads(iv["sum"], sums_read)} if isinstance(iv.get("sum"), dict) else {})},
                          ivs_read) for iv in doc["intervals"]]
            try:
                iperf3.flow_rows(ivs, is_server=server, omit=float(ts.get("omit") or 0),
                                 duration=float(ts["duration"]) if ts.get("duration") else None)
            except (KeyError, TypeError, ValueError):
                pass
            iperf3._impossible({"intervals": ivs})
            any("sum_bidir_reverse" in iv for iv in ivs)
    assert streams_read and streams_read <= set(iperf3.LEAN_STREAM)
    assert ivs_read <= {"streams", "sum", "sum_bidir_reverse"} and sums_read <= {"omitted"}


def test_a_lean_report_parses_as_the_whole_one(monkeypatch):
    # the importer reads its reports lean: a third less tree to make and free at 200 MB
    real = iperf3.load_json
    texts = {f: f.read_text() for f in sorted(V3.glob("*.json"))}
    texts["long"] = long_report(50)
    lean, whole = {}, {}
    for out, flag in ((lean, True), (whole, False)):
        monkeypatch.setattr(iperf3, "load_json", lambda text, lean=False, _f=flag: real(text, lean=_f))
        for f, text in texts.items():
            try:
                out[f] = iperf3_json.parse(text, "x.json")
            except InputError as e:
                out[f] = str(e)
    assert lean == whole
    assert sum(not isinstance(p, str) for p in lean.values()) > 10
    monkeypatch.setattr(iperf3, "load_json", real)
    d = iperf3.load_json(texts["long"], lean=True)[0]
    assert set(d["intervals"][0]["streams"][0]) <= set(iperf3.LEAN_STREAM) and "socket" not in \
        d["intervals"][0]["streams"][0]
    assert d["start"] == json.loads(texts["long"])["start"]       # the rest is whole
    assert iperf3.load_json(texts["long"])[0] == json.loads(texts["long"])


def test_a_long_files_samples_are_retagged_in_one_loop_and_spanned_once(monkeypatch):
    p = parse_file(long_report(100), "long.json")
    tags = dict(host="long.json#2", proc=1)
    assert retagged(p.samples, **tags) == list(map(retagger(**tags), p.samples))
    assert len({id(s.tags) for s in retagged(p.samples, **tags)}) <= 8
    spans = []
    real = group_mod._span
    monkeypatch.setattr(group_mod, "_span", lambda f: spans.append(f.name) or real(f))
    q = parse_file(long_report(100), "again.json")
    assert len(group_mod.group([p, q])) == 1 and sorted(spans) == ["again.json", "long.json"]


def test_the_window_figure_keys_no_sample_when_no_sender_gave_its_rtt(monkeypatch):
    # iperf3 JSON carries no rtt samples into an import: window_share keyed 113,000 byte samples for nothing
    p = parse_file(long_report(200), "long.json")
    receiver = {"tx": agg.aggregate([s for s in p.samples if s.metric == "tcp.bytes"], direction="tx")}
    reads = count_tag_reads(monkeypatch)
    assert tcp_analysis.window_share(p.samples, receiver, None) is None
    assert reads[0] == 0


def test_the_pro_rata_shares_are_the_overlap_formulas_to_the_bit():
    rnd = random.Random(33)
    for _ in range(200):
        w0 = rnd.uniform(-5, 5)
        w1 = w0 + rnd.choice([rnd.uniform(0.001, 20), 1.0, 0.5])
        v = []
        for _ in range(rnd.randint(1, 30)):
            a = rnd.choice([rnd.uniform(-10, 30), float(rnd.randint(-10, 30)), w0, w1])
            b = a + rnd.choice([rnd.uniform(1e-6, 5), 1.0, 0.25])
            v.append(Sample("", "tcp.bytes", rnd.choice([rnd.uniform(0, 1e10), float(rnd.randint(0, 10**9))]),
                            "bytes", a, b))
        want = [x.value * agg._overlap(x.t_start, x.t_end, w0, w1) / (x.t_end - x.t_start) for x in v]
        got = agg._pro_rata(v, w0, w1)
        assert [x.hex() for x in got] == [x.hex() for x in want]


def test_an_imports_raw_copy_is_not_read_back_to_be_hashed(capsys, tmp_path, monkeypatch):
    # the bytes copied are the bytes parsed, hashed already: a 200 MB report took 0.3 s to hash again
    hashed = []
    real = writer.sha256_of
    monkeypatch.setattr(writer, "sha256_of", lambda path: hashed.append(path) or real(path))
    files = [V3 / "tx_p2.json", V3 / "rx_p2.json"]
    code, out, err = nb(capsys, "import", "--json", "--store", tmp_path / "s", *files)
    assert code == 0, err
    assert hashed == []
    run_dir = Path(json.loads(out)["run_dir"])
    with Archive.open(tmp_path / "s") as a:
        rows = a.db.query("SELECT path, sha256, size FROM raw_outputs")
    assert sorted(Path(p).name.split("-", 1)[1] for p, _, _ in rows) == sorted(f.name for f in files)
    for path, sha, size in rows:
        data = (run_dir / path).read_bytes()
        assert sha == hashlib.sha256(data).hexdigest() and size == len(data)
        assert data == (V3 / Path(path).name.split("-", 1)[1]).read_bytes()


def test_the_senders_aggregate_has_no_time_series_and_the_same_totals(monkeypatch):
    # the senders' series was a pass over every sample and bin that nothing read
    p = iperf3_json.parse(long_report(50), "long.json")
    fp = flow_point(group([p])[0], "tcp")
    full = agg.aggregate(fp.samples, direction="tx", side="sender")
    lean = agg.aggregate(fp.samples, direction="tx", side="sender", series=False)
    assert len(full.series) >= 50 and lean.series == ()
    assert dataclasses.replace(full, series=()) == lean
    binned = []
    real = agg._series
    monkeypatch.setattr(agg, "_series", lambda *a: binned.append(1) or real(*a))
    [(trial, samples)] = records("tcp", ImportedRun((ImportedTrial("tx/c2", {"direction": "tx"}, fp.samples, {},
                                                                   ()),), {}))
    rec = tcp_analysis.trial_result(trial, samples, 0.0)
    assert rec.status == "ok" and rec.sender["tx"].series == () and len(rec.receiver["tx"].series) >= 50
    assert len(binned) == 1          # the receivers' series only


def test_an_imports_samples_are_stored_under_their_trial_not_copied_for_it(capsys, tmp_path):
    p = iperf3_json.parse(long_report(20), "long.json")
    fp = flow_point(group([p])[0], "tcp")
    [(trial, samples)] = records("tcp", ImportedRun((ImportedTrial("tx/c2", {"direction": "tx"}, fp.samples, {},
                                                                   ()),), {}))
    assert trial.spec.trial_id == "t0001" and all(a is b for a, b in zip(samples, fp.samples, strict=True))
    # the writer gives "" samples the trial's id, numbered in order; a sample with its own id keeps it
    own = Sample("t0009", "tcp.bytes", 1.0, "bytes", 0, 1)
    rows = writer.sample_rows(7, [*samples[:3], own], "t0001")
    assert [r[:3] for r in rows] == [(7, "t0001", 0), (7, "t0001", 1), (7, "t0001", 2), (7, "t0009", 0)]
    store = tmp_path / "store"
    code, out, err = nb(capsys, "import", "--json", "--store", store, V3 / "tx_p2.json")
    assert code == 0, err
    with Archive.open(store) as a:
        assert {r[0] for r in a.db.query("SELECT trial_id FROM samples")} == {"t0001"}


def test_tag_sets_looked_up_by_identity_are_never_mistaken_for_a_recycled_one():
    # a pass caches what a tag set says by id(); a tag set freed mid-pass could hand its id to
    # another: the caches hold each one, so every sample is read from its own tags
    def fresh():
        for i in range(2000):
            yield Sample("", "tcp.bytes", 1.0, "bytes", i, i + 1, make_tags(host="a", proc=i, direction="tx"))
    out = retagged(fresh(), host="b")
    assert [s.tags for s in out] == [make_tags(host="b", proc=i, direction="tx") for i in range(2000)]
    rows = writer.sample_rows(1, (Sample("t1", "m", 1.0, "bytes", 0, 1, make_tags(proc=i)) for i in range(2000)))
    assert [json.loads(r[-1]) for r in rows] == [{"proc": str(i)} for i in range(2000)]
    # equal tag sets that are distinct objects are one series where samples are summed by tag set
    tags = [tuple(list(make_tags(host="a", direction="tx", side="receiver"))) for _ in range(3)]
    assert len({id(t) for t in tags}) == 3
    p = dataclasses.replace(iperf3_json.parse(long_report(3), "x.json"),
                            samples=[Sample("", "tcp.bytes", 1.0, "bytes", i, i + 1, t) for i, t in enumerate(tags)])
    [(key, (total, t0, t1, n))] = bounds._series(p).items()
    assert (total, t0, t1, n) == (3.0, 0, 3, 3)
