"""iperf3 3.12 -J output, recorded on this machine (tests/fixtures/capture.sh)."""

from itertools import pairwise

import pytest

from conftest import fixture_text
from nicbench.core.errors import ToolError
from nicbench.tools import iperf3


def load(name):
    return iperf3.parse(fixture_text("iperf3", "3.12", name))


def by(rep, flow, side, omitted=None):
    return [i for i in rep.intervals if i.flow == flow and i.side == side
            and (omitted is None or i.omitted == omitted)]


def test_tx_parallel_has_sender_and_receiver_sides():
    r = load("tx_p2.json")
    assert r.error is None and r.has_server_output and not r.reverse and not r.bidir
    assert r.num_streams == 2 and r.blksize == 131072
    snd, rcv = by(r, "fwd", "sender"), by(r, "fwd", "receiver")
    assert len(snd) == 3 and all(i.streams == 2 for i in snd)
    assert len(rcv) >= 3
    # the receiver's intervals add up to the receiver total it reported at the end
    assert sum(i.bytes for i in rcv) == r.totals["fwd.receiver"]
    assert sum(i.bytes for i in snd) == r.totals["fwd.sender"]
    assert not by(r, "rev", "receiver")


def test_reverse_puts_receiver_on_the_client():
    r = load("rx_p2.json")
    assert r.reverse
    rcv = by(r, "rev", "receiver")
    assert rcv and sum(i.bytes for i in rcv) == r.totals["rev.receiver"]
    assert by(r, "rev", "sender")       # from the server's JSON
    assert not by(r, "fwd", "sender")


def test_bidir_separates_both_flows_without_sum_keys():
    r = load("bidir_p2.json")
    assert r.bidir
    for flow in ("fwd", "rev"):
        rcv = by(r, flow, "receiver")
        assert rcv, flow
        assert sum(i.bytes for i in rcv) == r.totals[f"{flow}.receiver"]
    assert all(i.streams == 2 for i in r.intervals if i.end - i.start > 0.5)


def test_omit_intervals_marked_and_clock_continuous():
    r = load("tx_omit.json")
    for side in ("sender", "receiver"):
        ivs = by(r, "fwd", side)
        assert ivs[0].omitted and not any(i.omitted for i in ivs[1:])
        # iperf3 restarts its clock at 0 after -O; the parser must undo that
        for a, b in pairwise(ivs):
            assert b.start >= a.end - 1e-3
        assert ivs[-1].end == pytest.approx(5.0, abs=0.01)


def test_reverse_omit_reset_quirk_treats_the_broken_interval_as_warmup():
    # 3.12 prints the first post-warm-up interval of a -R receiver with start > end;
    # its bytes reach back into the warm-up by an unknown amount, so it is warm-up
    r = load("rx_omit_reset_quirk.json")
    rcv = by(r, "rev", "receiver")
    broken = [i for i in rcv if i.omitted][-1]
    measured = [i for i in rcv if not i.omitted]
    assert broken.start == pytest.approx(1.0) and broken.end == pytest.approx(1.5, abs=0.01)
    assert measured[0].start == pytest.approx(broken.end, abs=1e-3)
    assert all(i.end > i.start for i in measured)
    assert sum(i.bytes for i in measured) + broken.bytes == r.totals["rev.receiver"]
    for a, b in pairwise(measured):
        assert b.start >= a.end - 1e-3


def test_junk_around_json_is_tolerated():
    assert load("junk_around.json").intervals == load("tx_omit.json").intervals


def test_udp_and_bytecount_modes_parse():
    u = load("udp.json")
    assert u.protocol == "UDP" and by(u, "fwd", "sender")
    n = load("bytes_n.json")
    assert n.totals["fwd.sender"] == 200 * 1024 * 1024


def test_zerocopy_small_io():
    # recorded without --get-server-output: only the sender's intervals, but the
    # receiver's total still comes back in the end section
    r = load("tx_zerocopy_small.json")
    assert r.blksize == 512 and by(r, "fwd", "sender") and not by(r, "fwd", "receiver")
    assert 0 < r.totals["fwd.receiver"] <= r.totals["fwd.sender"]


@pytest.mark.parametrize("name, text", [("err_busy.json", "busy"), ("err_refused.json", "Connection refused")])
def test_error_key_is_reported(name, text):
    r = load(name)
    assert r.error and text in r.error
    assert r.intervals == ()


def test_killed_client_still_gives_its_intervals():
    r = load("err_killed.json")
    assert r.error is None and not r.has_server_output
    assert len(by(r, "fwd", "sender")) >= 2


def test_truncated_json_is_a_tool_error():
    with pytest.raises(ToolError, match="truncated"):
        load("err_truncated.json")


def test_empty_output_is_a_tool_error():
    with pytest.raises(ToolError, match="no JSON"):
        iperf3.parse("")


def test_features_from_help():
    info = iperf3.info_from("iperf 3.12 (cJSON 1.7.15)\nLinux", "  --bidir  ...\n  -Z, --zerocopy ...")
    assert info.version == (3, 12) and info.has("bidir") and not info.has("skip_rx_copy")
    argv = iperf3.client_argv(info, target="198.18.0.2", port=5201, duration=3, omit=1, interval=0.5,
                              io_size=512, streams=4, mode="rev", zerocopy=True, no_delay=True)
    assert argv[:3] == ["iperf3", "-c", "198.18.0.2"]
    assert "-R" in argv and "-Z" in argv and "-N" in argv and "--skip-rx-copy" not in argv
    assert argv[argv.index("-t") + 1] == "3" and argv[argv.index("-O") + 1] == "1"
    with pytest.raises(ValueError):
        iperf3.client_argv(info, target="x", port=1, duration=1, omit=0, interval=1, io_size=1,
                           streams=129, mode="fwd")


def test_reverse_omit_squeezed_first_interval_is_placed_after_the_warmup():
    # 3.12 printed the first measured -R interval as 0.5003 -> 0.5006 with half a
    # second of bytes; the process must not be placed half a second early
    r = load("rx_omit_squeezed_quirk.json")
    rcv = by(r, "rev", "receiver", omitted=False)
    # the squeezed interval itself is warm-up: measurement starts where it ends
    assert rcv[0].start == pytest.approx(1.5, abs=0.01)
    assert rcv[-1].end == pytest.approx(4.0, abs=0.01)          # omit 1 + duration 3
    assert all(0.45 < i.end - i.start < 0.55 for i in rcv)
    squeezed = [i for i in by(r, "rev", "receiver", omitted=True) if i.start >= 1.0]
    assert len(squeezed) == 1 and sum(i.bytes for i in rcv) + squeezed[0].bytes == r.totals["rev.receiver"]
    snd = by(r, "rev", "sender", omitted=False)
    assert snd[-1].end == pytest.approx(4.0, abs=0.01)


def test_braces_in_the_junk_around_json():
    text = "warning: ignoring {foo}\n" + fixture_text("iperf3", "3.12", "tx_omit.json") + "\n{bar}"
    assert iperf3.parse(text).intervals == load("tx_omit.json").intervals


def test_a_servers_own_json_keeps_its_direction():
    import json
    server_only = json.dumps(json.loads(fixture_text("iperf3", "3.12", "tx_p2.json"))["server_output_json"])
    r = iperf3.parse(server_only)
    assert {(i.flow, i.side) for i in r.intervals} == {("fwd", "receiver")}
    assert r.totals["fwd.receiver"] == load("tx_p2.json").totals["fwd.receiver"]


def test_the_senders_tcp_state_is_kept_per_interval():
    # tx_p2.json (iperf3 3.12, Linux): each sending stream's rtt (us), snd_cwnd and snd_wnd per interval
    rep = iperf3.parse(fixture_text("iperf3", "3.12", "tx_p2.json"))
    snd = [iv for iv in rep.intervals if iv.side == "sender" and not iv.by_peer]
    first = snd[0]
    assert first.streams == 2 and first.rtt_s == pytest.approx((93 + 37) / 2 / 1e6)
    assert (first.snd_cwnd, first.snd_wnd) == (417024 + 529968, 24771584 + 22915072)
    # the receiving end knows none of it
    assert all(iv.rtt_s is None and iv.snd_wnd is None for iv in rep.intervals if iv.side == "receiver")
