"""FreeBSD counters (pure parsers), into the structures the Linux parsers give.

- ``sysctl -n kern.cp_times``: 5 counters per CPU (user nice sys intr idle,
  sys/resource.h CPUSTATES), in statclock ticks: ``kern.clockrate``'s
  ``stathz`` per second, not USER_HZ.  FreeBSD has no iowait, softirq or
  steal states: those keys are absent (not zero) from its CpuTimes.
- ``netstat -ibdn`` / ``netstat -I IF -bdn``: one ``<Link#N>`` row per
  interface carries its counters (Ipkts Ierrs Idrop Ibytes Opkts Oerrs
  Obytes Coll [Drop]); address rows repeat per-address counts or ``-``.
- ``netstat -s -p tcp``: the tcpstat counters as text (usr.bin/netstat/inet.c
  ``tcp_stats``), keyed here by netstat's own libxo names.
- ``vmstat -i``: interrupts, totals only (FreeBSD gives no per-CPU split).

Every parser raises only :class:`ToolError` (a layout it cannot split safely).
"""

from __future__ import annotations

import re

from ..core.errors import ToolError
from .netdev import IfCounters
from .procstat import CpuTimes

# kern.cp_times columns, in order (sys/resource.h: CP_USER CP_NICE CP_SYS CP_INTR CP_IDLE)
CP_STATES = ("user", "nice", "system", "irq", "idle")


def _strip_name(text: str, name: str) -> str:
    """``sysctl NAME`` prints ``NAME: value``; ``sysctl -n NAME`` only the value."""
    t = text.strip()
    return t[len(name) + 1:].strip() if t.startswith(name + ":") else t


def parse_cp_times(text: str) -> dict[str, CpuTimes]:
    """Per-CPU ticks ("0", "1", ...) and their sum as "all"."""
    body = _strip_name(text, "kern.cp_times")
    try:
        vals = [int(x) for x in body.split()]
    except ValueError:
        raise ToolError(f"kern.cp_times is not a list of counters: {body[:80]!r}", where="kern.cp_times") from None
    if not vals or len(vals) % len(CP_STATES):
        raise ToolError(f"kern.cp_times has {len(vals)} counters, not a multiple of {len(CP_STATES)}",
                        where="kern.cp_times")
    out: dict[str, CpuTimes] = {}
    total = dict.fromkeys(CP_STATES, 0)
    for i in range(0, len(vals), len(CP_STATES)):
        ticks = dict(zip(CP_STATES, vals[i:i + len(CP_STATES)], strict=True))
        out[str(i // len(CP_STATES))] = CpuTimes(str(i // len(CP_STATES)), ticks)
        for k, v in ticks.items():
            total[k] += v
    out["all"] = CpuTimes("all", total)
    return out


_RATE = re.compile(r"(\w+)\s*=\s*(\d+)")


def parse_clockrate(text: str) -> dict[str, int]:
    """``kern.clockrate: { hz = 1000, tick = 1000, profhz = 8128, stathz = 127 }``
    -> ``{"hz": 1000, "tick": 1000, "profhz": 8128, "stathz": 127}``."""
    return {k: int(v) for k, v in _RATE.findall(_strip_name(text, "kern.clockrate"))}


# netstat -i column -> /proc/net/dev-style key (sampling.netdev)
_NETSTAT_I = {"Ipkts": "rx_packets", "Ierrs": "rx_errs", "Idrop": "rx_drop", "Ibytes": "rx_bytes",
              "Opkts": "tx_packets", "Oerrs": "tx_errs", "Obytes": "tx_bytes", "Coll": "tx_colls",
              "Drop": "tx_drop"}


def parse_netstat_i(text: str) -> dict[str, IfCounters]:
    """Each interface's link-layer counters from ``netstat -ibdn`` (or
    ``-I IF -bdn``).  The counters are the last columns of a row (the
    Address column is empty for an interface without a link address), so
    rows are split from the right by the header's count.  An interface
    that is down is printed as ``name*``: the star is dropped."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    head = next((ln.split() for ln in lines if ln.split()[:1] == ["Name"]), None)
    if head is None or "Ipkts" not in head:
        raise ToolError("netstat -i output has no header with Ipkts", where="netstat -i",
                        hint="was it run with -i (or -I IF)?")
    cols = head[head.index("Ipkts"):]
    unknown = [c for c in cols if c not in _NETSTAT_I]
    if unknown:
        raise ToolError(f"netstat -i has columns nicbench does not know: {' '.join(unknown)}", where="netstat -i")
    out: dict[str, IfCounters] = {}
    for ln in lines:
        f = ln.split()
        if len(f) < 3 + len(cols) or not f[2].startswith("<Link#"):
            continue
        name = f[0].rstrip("*")
        vals: dict[str, int] = {}
        for c, v in zip(cols, f[-len(cols):], strict=True):
            if v.isdigit():
                vals[_NETSTAT_I[c]] = int(v)
            elif v != "-":
                raise ToolError(f"netstat -i: {name} {c} is {v!r}, not a count", where="netstat -i")
        out[name] = IfCounters(name, vals)
    return out


# -- netstat -s -p tcp ------------------------------------------------------
# Each line of FreeBSD's tcp_stats (usr.bin/netstat/inet.c) as a pattern
# with the libxo names of its numbers.  Plurals vary with the count
# ("1 packet" / "2 packets"), hence "s?" and "(?:y|ies)".
_TCP_LINES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"# packets? sent", ("sent-packets",)),
    (r"# data packets? \(# bytes?\)", ("sent-data-packets", "sent-data-bytes")),
    (r"# data packets? \(# bytes?\) retransmitted", ("sent-retransmitted-packets", "sent-retransmitted-bytes")),
    (r"# data packets? unnecessarily retransmitted", ("sent-unnecessary-retransmitted-packets",)),
    (r"# resends? initiated by MTU discovery", ("sent-resends-by-mtu-discovery",)),
    (r"# ack-only packets? \(# delayed\)", ("sent-ack-only-packets", "sent-packets-delayed")),
    (r"# URG only packets?", ("sent-urg-only-packets",)),
    (r"# window probe packets?", ("sent-window-probe-packets",)),
    (r"# window update packets?", ("sent-window-update-packets",)),
    (r"# control packets?", ("sent-control-packets",)),
    (r"# packets? received", ("received-packets",)),
    (r"# acks? \(for # bytes?\)", ("received-ack-packets", "received-ack-bytes")),
    (r"# duplicate acks?", ("received-duplicate-acks",)),
    (r"# acks? for unsent data", ("received-acks-for-unsent-data",)),
    (r"# packets? \(# bytes?\) received in-sequence", ("received-in-sequence-packets", "received-in-sequence-bytes")),
    (r"# completely duplicate packets? \(# bytes?\)",
     ("received-completely-duplicate-packets", "received-completely-duplicate-bytes")),
    (r"# old duplicate packets?", ("received-old-duplicate-packets",)),
    (r"# packets? with some dup\. data \(# bytes? duped\)",
     ("received-some-duplicate-packets", "received-some-duplicate-bytes")),
    (r"# out-of-order packets? \(# bytes?\)", ("received-out-of-order", "received-out-of-order-bytes")),
    (r"# packets? \(# bytes?\) of data after window",
     ("received-after-window-packets", "received-after-window-bytes")),
    (r"# window probes?", ("received-window-probes",)),
    (r"# packets? received after close", ("received-after-close-packets",)),
    (r"# discarded for bad checksums?", ("discard-bad-checksum",)),
    (r"# discarded for bad header offset fields?", ("discard-bad-header-offset",)),
    (r"# discarded because packet too short", ("discard-too-short",)),
    (r"# discarded due to memory problems", ("discard-memory-problems",)),
    (r"# connection requests?", ("connection-requests",)),
    (r"# connection accepts?", ("connections-accepts",)),
    (r"# bad connection attempts?", ("bad-connection-attempts",)),
    (r"# listen queue overflows?", ("listen-queue-overflows",)),
    (r"# ignored RSTs in the windows?", ("ignored-in-window-resets",)),
    (r"# connections? established \(including accepts\)", ("connections-established",)),
    (r"# connections? closed \(including # drops?\)", ("connections-closed", "connection-drops")),
    (r"# embryonic connections? dropped", ("embryonic-connections-dropped",)),
    (r"# segments? updated rtt \(of # attempts?\)", ("segments-updated-rtt", "segment-update-attempts")),
    (r"# retransmit timeouts?", ("retransmit-timeouts",)),
    (r"# connections? dropped by rexmit timeout", ("connections-dropped-by-retransmit-timeout",)),
    (r"# persist timeouts?", ("persist-timeout",)),
    (r"# connections? dropped by persist timeout", ("connections-dropped-by-persist-timeout",)),
    (r"# Connections? \(fin_wait_2\) dropped because of timeout", ("connections-dropped-by-finwait2-timeout",)),
    (r"# keepalive timeouts?", ("keepalive-timeout",)),
    (r"# keepalive probes? sent", ("keepalive-probes",)),
    (r"# connections? dropped by keepalive", ("connections-dropped-by-keepalives",)),
    (r"# correct ACK header predictions?", ("ack-header-predictions",)),
    (r"# correct data packet header predictions?", ("data-packet-header-predictions",)),
    (r"# syncache entr(?:y|ies) added", ("syncache-entries-added",)),
    (r"# SACK recovery episodes?", ("sack-recovery-episodes",)),
    (r"# segment rexmits? in SACK recovery episodes", ("sack-segment-retransmits",)),
    (r"# byte rexmits? in SACK recovery episodes", ("sack-byte-retransmits",)),
    (r"# SACK options? \(SACK blocks\) received", ("sack-received-blocks",)),
    (r"# SACK options? \(SACK blocks\) sent", ("sack-sent-option-blocks",)),
    (r"# SACK scoreboard overflow", ("sack-scoreboard-overflows",)),
    (r"# packets? with ECN CE bit set", ("ecn-ce-packets",)),
    (r"# successful ECN handshakes?", ("ecn-handshakes",)),
    (r"# times? ECN reduced the congestion window", ("ecn-congestion-reductions",)),
)
_TCP_RX = tuple((re.compile("^" + p.replace("#", r"(\d+)") + "$"), keys) for p, keys in _TCP_LINES)
_WINDOW_UPDATE = re.compile(r"^(\d+) window update packets?$")


def parse_netstat_s_tcp(text: str) -> dict[str, dict[str, int]]:
    """``{"Tcp": {"OutSegs": ..., "RetransSegs": ...}, "FreeBSD.tcp": {libxo name: count}}``.

    ``FreeBSD.tcp`` holds every line this parser knows, by netstat's own
    libxo names; lines it does not know are left out.  ``Tcp`` holds the
    two counters whose meaning matches Linux's /proc/net/snmp, so
    :func:`nicbench.sampling.netstat.watched` reads both OSes alike:
    RetransSegs = data packets retransmitted (tcps_sndrexmitpack), OutSegs =
    packets sent less those (tcps_sndtotal counts retransmissions; Linux's
    OutSegs does not).  A "window update packets" line is the sender's when
    it comes before "packets received", the receiver's after."""
    if "tcp:" not in text:
        raise ToolError("netstat -s -p tcp printed no 'tcp:' section", where="netstat -s -p tcp")
    vals: dict[str, int] = {}
    received = False
    for raw in text.splitlines():
        line = " ".join(raw.split())
        m = _WINDOW_UPDATE.match(line)
        if m:
            vals["received-window-update-packets" if received else "sent-window-update-packets"] = int(m.group(1))
            continue
        for rx, keys in _TCP_RX:
            m = rx.match(line)
            if m:
                vals.update(zip(keys, (int(g) for g in m.groups()), strict=True))
                received = received or keys[0] == "received-packets"
                break
    out: dict[str, dict[str, int]] = {"FreeBSD.tcp": vals}
    linux: dict[str, int] = {}
    if "sent-retransmitted-packets" in vals:
        linux["RetransSegs"] = vals["sent-retransmitted-packets"]
        if "sent-packets" in vals:
            linux["OutSegs"] = vals["sent-packets"] - vals["sent-retransmitted-packets"]
    out["Tcp"] = linux
    return out


def parse_vmstat_i(text: str) -> dict[str, tuple[dict[str, int], str]]:
    """``vmstat -i``: interrupt name -> ({"all": total}, "") in the shape of
    :func:`nicbench.sampling.netstat.parse_interrupts` (FreeBSD reports no
    per-CPU split, and the rate column is an average since boot: left out)."""
    out: dict[str, tuple[dict[str, int], str]] = {}
    for ln in text.splitlines():
        f = ln.split()
        if len(f) < 3 or not (f[-1].isdigit() and f[-2].isdigit()) or f[0] == "Total":
            continue
        out[" ".join(f[:-2])] = ({"all": int(f[-2])}, "")
    if not out:
        raise ToolError("vmstat -i listed no interrupts", where="vmstat -i")
    return out
