"""Damaged imports never become clean points (issue 33 item 3): the tools' own
completeness markers (wrk's Transfer/sec line, iperf3's end object) and the
plausibility bounds of :mod:`nicbench.importers.bounds`, on real files cut or
mutated here.  Each damage is refused in one line naming the file and field."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES
from conftest import run_cli as nb
from nicbench.core.errors import InputError
from nicbench.importers import parse_file

IMP = FIXTURES / "import"
V3 = FIXTURES / "iperf3" / "3.12"


def cut_before(rel: str, line_start: str) -> str:
    """A real wrk text cut off just before its first line starting with ``line_start``."""
    text = (IMP / rel).read_text()
    at = text.index(line_start)
    return text[:text.rindex("\n", 0, at) + 1]


@pytest.mark.parametrize("rel, cut_at", [
    ("wrk/local/non2xx_404.txt", "  Non-2xx"),        # 40721 non-2xx of 40721: would have looked clean
    ("wrk/local/non2xx_404.txt", "Transfer/sec"),     # the non-2xx line kept, the last line lost
    ("wrk/ext/wrk_issue256.txt", "  Socket errors"),  # 3268 read errors lost
    ("wrk/ext/pkb_wrk2_output_errors.txt", "Requests/sec"),
])
def test_a_wrk_text_cut_before_its_transfer_line_is_refused(rel, cut_at):
    text = cut_before(rel, cut_at)
    assert " requests in " in text and "Transfer/sec" not in text
    with pytest.raises(InputError, match=r"cut off.*non-2xx") as e:
        parse_file(text, "cut.txt")
    assert e.value.where == "cut.txt" and e.value.hint
    parse_file((IMP / rel).read_text(), rel)          # the whole file still reads


def test_a_wrk_lua_csv_tail_after_transfer_is_still_complete():
    # PKB's wrk run prints a Lua done() CSV after Transfer/sec: complete
    p = parse_file((IMP / "wrk/ext/pkb_wrk_result.txt").read_text(), "pkb.txt")
    assert p.totals["requests_per_s"] == 9605.69


def _tx_p2() -> dict:
    return json.loads((V3 / "tx_p2.json").read_text())


def _all_bytes(d: dict, value: float) -> None:
    for doc in (d, d["server_output_json"]):
        for iv in doc["intervals"]:
            for st in [*iv["streams"], iv["sum"]]:
                st["bytes"] = value
        for st in doc["end"]["streams"]:
            for side in ("sender", "receiver"):
                if isinstance(st.get(side), dict):
                    st[side]["bytes"] = value


def test_byte_counts_no_nic_carries_are_refused_naming_the_field():
    d = _tx_p2()
    _all_bytes(d, 1e23)                # the audit's file: 1.6e15 Gbit/s imported as ok
    with pytest.raises(InputError, match=r"bytes is 2e\+23 bytes over .* more than any NIC carries "
                                         r"\(bound 10 Tbit/s\)") as e:
        parse_file(json.dumps(d), "huge.json")
    assert e.value.where == "huge.json" and "summary's tx.receiver.bytes" in e.value.message
    one = _tx_p2()                     # one interval alone, the summary intact
    one["server_output_json"]["intervals"][1]["streams"][0]["bytes"] = 1e23
    with pytest.raises(InputError, match=r"tcp.bytes intervals \(tx receiver, 4 of them\) sum to 1e\+23 bytes "
                                         r"over .*more than any NIC carries"):
        parse_file(json.dumps(one), "one.json")


def test_negative_byte_counts_are_refused():
    d = _tx_p2()                        # an interval's count (the summary's were refused before)
    d["server_output_json"]["intervals"][1]["streams"][0]["bytes"] = -5e9
    with pytest.raises(InputError, match=r"an interval's tcp.bytes \(tx receiver, .*\) is negative") as e:
        parse_file(json.dumps(d), "neg.json")
    assert e.value.where == "neg.json"


def test_a_negative_summary_count_is_refused_with_a_hint():
    d = _tx_p2()                        # refused before, but with no hint (the style's one line has one)
    d["end"]["streams"][0]["receiver"]["bytes"] = -5
    with pytest.raises(InputError, match=r"end.streams\[\].bytes is negative \(-5\)") as e:
        parse_file(json.dumps(d), "neg.json")
    assert e.value.where == "neg.json" and "damaged" in (e.value.hint or "")


def test_intervals_that_disagree_with_their_own_summary_are_refused_saying_by_how_much():
    d = _tx_p2()
    for st in d["end"]["streams"]:      # the summary shrunk 166 times, the intervals as measured
        for side in ("sender", "receiver"):
            st[side]["bytes"] = round(st[side]["bytes"] / 166)
    with pytest.raises(InputError, match=r"tx receiver: its intervals sum to .* own summary says .*: 166x apart") \
            as e:
        parse_file(json.dumps(d), "edited.json")
    assert e.value.where == "edited.json"
    # real files differ by much less: iperf3 3.12's --bidir with a server clock half a second late (0.83x)
    parse_file((V3 / "bidir_busy_server_clock_late.json").read_text(), "late.json")


def test_an_iperf3_report_without_its_end_object_is_refused():
    # recorded: the UDP server killed mid-test; iperf3 wrote intervals, an empty end and its error
    with pytest.raises(InputError, match=r"no end summary.*did not finish \(iperf3 reported: control socket has "
                                         r"closed unexpectedly\)"):
        parse_file((V3 / "udp_server_killed.json").read_text(), "killed.json")
    d = _tx_p2()
    del d["end"]
    with pytest.raises(InputError, match="no end summary"):
        parse_file(json.dumps(d), "no_end.json")


def test_a_refused_import_is_one_line_and_writes_nothing(capsys, tmp_path):
    d = _tx_p2()
    _all_bytes(d, 1e23)
    f = tmp_path / "huge.json"
    f.write_text(json.dumps(d))
    code, _, err = nb(capsys, "import", "--store", tmp_path / "s", f)
    assert code == 2 and "huge.json" in err and "more than any NIC carries" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())
