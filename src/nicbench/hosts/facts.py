"""Collecting host facts: one POSIX shell script per host, one round trip.

The script prints sections (``@@nicbench-section NAME`` ... ``@@nicbench-rc N``)
of raw text: files read from /proc and /sys, ``ethtool`` and ``lscpu`` output,
tool ``--version`` lines.  Nothing is interpreted on the host; the raw text is
kept with the run and turned into facts by :mod:`nicbench.hosts.factparse`
(pure, tested on recorded outputs), so a better parser can re-read old runs.

One script rather than one command per fact because over SSH every command
costs a round trip (and, measured here, ~0.4 s of login-shell start-up).  The
script only reads: it never changes a setting, and it uses ``sh``, ``cat``,
``grep``, ``readlink`` and, when present, ``ethtool``, ``lscpu`` and
``tuned-adm``.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Sequence

from ..core.errors import NicbenchError, ToolError, tail
from ..records import Fact, HostFacts
from . import facts_freebsd
from .factparse import parse_facts
from .transport import Transport, host_os

# The sysctls the seeds tune (000, 002), the ones that explain TCP results, and
# busy polling (busy_poll/busy_read: us a socket spins on the NIC queue instead
# of sleeping for the interrupt), which explains request/response latency,
# and RFS's flow table (what an RPS recommendation sizes).
SYSCTLS = (
    "net.core.rmem_max", "net.core.wmem_max", "net.core.rmem_default", "net.core.wmem_default",
    "net.core.optmem_max", "net.core.netdev_max_backlog", "net.core.netdev_budget",
    "net.core.default_qdisc", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_mem",
    "net.ipv4.tcp_timestamps", "net.ipv4.tcp_sack", "net.ipv4.tcp_window_scaling",
    "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_available_congestion_control",
    "net.ipv4.tcp_mtu_probing", "net.ipv4.tcp_low_latency", "net.core.busy_poll", "net.core.busy_read",
    "net.core.rps_sock_flow_entries",
)

# tool -> argv printing its version (stdout or stderr; both are captured)
TOOL_VERSION_ARGV: dict[str, tuple[str, ...]] = {
    "iperf3": ("iperf3", "--version"),
    "iperf": ("iperf", "--version"),
    "ethtool": ("ethtool", "--version"),
    "nginx": ("nginx", "-v"),
    "wrk": ("wrk", "-v"),
    "fio": ("fio", "--version"),
    "trafgen": ("trafgen", "--version"),
    "nbdkit": ("nbdkit", "--version"),
    "tgtd": ("tgtd", "--version"),
    "numactl": ("numactl", "--show"),
    "openssl": ("openssl", "version"),
    "irtt": ("irtt", "version"),
    "sockperf": ("sockperf", "--version"),
}

_IFNAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")

# the IRQs of interface $1, one line each: IRQ, its affinity list, its /proc/interrupts
# counts and name (shared with the NIC counters' read, sampling/nicstats.py)
IRQS_SH = r"""
irqs() { i=$1; list=; d=
  # a virtual interface has no IRQs: a name match in the machine-wide /proc/interrupts
  # would be another device's (the machine's own eth0 seen from a lab namespace)
  [ -e /sys/class/net/$i/device ] || return 0
  e=$(printf '%s' "$i" | sed 's/[.]/[.]/g')
  list=$(grep -E "[[:space:]]$e([-_:][^[:space:]]*)?\$" /proc/interrupts | cut -d: -f1)
  d=$(readlink -f /sys/class/net/$i/device 2>/dev/null)
  while [ -n "$d" ] && [ "$d" != /sys ] && [ ! -d "$d/msi_irqs" ]; do d=${d%/*}; done
  [ -n "$d" ] && [ -d "$d/msi_irqs" ] && list="$list $(ls $d/msi_irqs)"
  for q in $(printf '%s\n' $list | sort -un); do
    a=$(cat /proc/irq/$q/smp_affinity_list 2>/dev/null) || a='!unreadable'
    printf '%s\t%s\t%s\n' "$q" "$a" "$(grep -E "^ *$q:" /proc/interrupts | sed 's/^[^:]*://' | tr -s ' ')"
  done; true; }
"""
# Shell helpers.  Each section is run as ``sec NAME command...``; its stdout
# and stderr go to the report, its exit code after it.
_PRELUDE = r"""
export LC_ALL=C PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
sec() { n=$1; shift; printf '@@nicbench-section %s\n' "$n"; "$@" 2>&1; rc=$?; printf '\n@@nicbench-rc %s\n' "$rc"; }
kv() { for f in "$@"; do
  if [ -e "$f" ]; then v=$(cat "$f" 2>/dev/null) || v='!unreadable'; else v='!missing'; fi
  printf '%s\t%s\n' "$f" "$v"; done; }
sysctls() { for k in "$@"; do f=/proc/sys/$(printf '%s' "$k" | tr . /); kv "$f"; done; }
daemons() { for c in /proc/[0-9]*/comm; do n=; read -r n < "$c" 2>/dev/null
  case "$n" in irqbalance|tuned|firewalld|cpupower) printf '%s\n' "$n";; esac; done | sort -u; }
numa() { for n in /sys/devices/system/node/node[0-9]*; do
  [ -d "$n" ] && printf '%s\t%s\n' "${n##*/}" "$(cat $n/cpulist)"; done; true; }
governor() { for g in /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor; do
  [ -e "$g" ] && printf '%s\t%s\n' "${g%/cpufreq/*}" "$(cat $g)"; done; true; }
tuned() { if command -v tuned-adm >/dev/null; then tuned-adm active; elif [ -r /etc/tuned/active_profile ]; then
  printf 'file: %s\n' "$(cat /etc/tuned/active_profile)"; else echo '!not-installed'; fi; }
nic() { i=$1; d=/sys/class/net/$i
  [ -e "$d" ] || { echo '!no-such-interface'; return 2; }
  kv $d/mtu $d/speed $d/duplex $d/operstate $d/tx_queue_len
  printf 'queues\t%s\n' "$(ls $d/queues 2>/dev/null | tr '\n' ' ')"
  dev=; [ -e $d/device ] && dev=$(readlink -f $d/device 2>/dev/null); printf 'device\t%s\n' "${dev:-!virtual}"
  p=$dev; while [ -n "$p" ] && [ "$p" != /sys ] && [ ! -e "$p/numa_node" ]; do p=${p%/*}; done
  [ -n "$p" ] && [ -e "$p/numa_node" ] || return 0
  printf 'busdev\t%s\n' "$p"
  kv $p/numa_node $p/local_cpulist $p/current_link_speed $p/max_link_speed $p/current_link_width $p/max_link_width
  for q in $p/msi_irqs/*; do [ -e "$q" ] && printf 'msi\t%s\n' "${q##*/}"; done; true; }
pktgens() { if [ -d /proc/net/pktgen ]; then echo 'pktgen loaded'
  elif modinfo pktgen >/dev/null 2>&1; then echo 'pktgen module'; else echo 'pktgen absent'; fi
  if [ -e /dev/netmap ]; then echo 'netmap loaded'; else echo 'netmap absent'; fi
  if command -v pkt-gen >/dev/null 2>&1; then echo 'pkt-gen installed'; else echo 'pkt-gen absent'; fi; }
"""


def script(ifnames: Sequence[str], tools: Sequence[str]) -> str:
    """The collection script for these interfaces and tools (pure)."""
    for i in ifnames:
        if not _IFNAME.match(i):
            raise ValueError(f"not an interface name: {i!r}")
    lines = [
        _PRELUDE + IRQS_SH,
        "sec uname uname -srvm",
        "sec hostname cat /proc/sys/kernel/hostname",
        "sec os-release cat /etc/os-release",
        "sec lscpu lscpu -J",
        "sec cpuinfo grep -m 4 -E '^(model name|cpu MHz|Hardware|CPU part)' /proc/cpuinfo",
        "sec nproc grep -c ^processor /proc/cpuinfo",
        "sec meminfo grep -E '^(MemTotal|MemAvailable|HugePages_Total):' /proc/meminfo",
        "sec numa numa",
        "sec governor governor",
        "sec tuned tuned",
        "sec daemons daemons",
        "sec pktgen pktgens",
        "sec sysctl sysctls " + " ".join(SYSCTLS),
    ]
    for i in ifnames:
        lines += [
            f"sec 'nic {i}' nic {i}",
            f"sec 'irqs {i}' irqs {i}",
            *(f"sec 'ethtool{flag} {i}' ethtool {flag} {i}" for flag in ("-i", "-k", "-g", "-l", "-c")),
        ]
    for tool in tools:
        argv = TOOL_VERSION_ARGV.get(tool, (tool, "--version"))
        lines.append(f"sec 'tool {tool}' " + shlex.join(argv))
    return "\n".join(lines) + "\n"


def script_for(t: Transport, ifnames: Sequence[str], tools: Sequence[str]) -> str:
    """The collection script for the OS preflight found on ``t`` (Linux or FreeBSD)."""
    if host_os(t) == "FreeBSD":
        return facts_freebsd.script(ifnames, [(x, TOOL_VERSION_ARGV.get(x, (x, "--version"))) for x in tools])
    return script(ifnames, tools)


def collect_raw(t: Transport, ifnames: Sequence[str], tools: Sequence[str], timeout: float = 30.0) -> str:
    """Run the script on the host; the raw sectioned text."""
    r = t.run(["sh", "-c", script_for(t, ifnames, tools)], timeout=timeout)
    if "@@nicbench-section" not in r.stdout:
        raise ToolError(
            f"host facts script printed nothing usable (exit {r.returncode}): {tail(r.stderr) or tail(r.stdout)}",
            where=t.host,
            hint="the host needs a POSIX sh and /proc, /sys mounted",
        )
    return r.stdout


def collect(t: Transport, role: str, ifnames: Sequence[str], tools: Sequence[str]) -> tuple[HostFacts, str]:
    """Facts of one host and the raw text they were read from."""
    raw = collect_raw(t, ifnames, tools)
    parse = facts_freebsd.parse_facts if host_os(t) == "FreeBSD" else parse_facts
    return parse(raw, host=t.host, role=role, collected=time.time()), raw


def collect_quietly(t: Transport, role: str, ifnames: Sequence[str], tools: Sequence[str]) -> tuple[HostFacts, str]:
    """As :func:`collect`, but a host whose facts cannot be read still gets a
    record: one fact saying why, so a run is never lost for want of facts."""
    try:
        return collect(t, role, ifnames, tools)
    except NicbenchError as e:
        return HostFacts(t.host, role, time.time(), (Fact("facts", None, e.one_line(), "collection"),)), ""
