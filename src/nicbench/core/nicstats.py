"""What a NIC driver's own counters (``ethtool -S``) mean: the small table
both sides read (the sampler keeps the counters it names; the analysis and
the verdict read them by meaning).

Counters are kept as the driver names them: the same event has a different
name per driver (mlx5 ``rx_out_of_buffer``, ixgbe ``rx_no_buffer_count``),
and the same name can mean different things (virtio's
``rx_queue_0_xdp_packets`` counts the packets an XDP program saw, veth's is
every packet its NAPI queue received).  So the table is per driver, with a
generic part for drivers it does not list.

Meanings (closed set, :data:`MEANINGS`):

- ``packets``, ``bytes``: one queue's traffic (rx or tx, queue number);
- ``ring``: frames the NIC had and the host did not take in time -- no Rx
  buffer or descriptor posted, the ring or the adapter's FIFO ran over
  (mlx5 ``rx_out_of_buffer``, ixgbe ``rx_missed_errors``/``rx_no_buffer_count``,
  i40e/ice ``rx_dropped``, bnxt ``[N]: rx_discards``, virtio/veth
  ``rx_queue_N_drops``): the host's receive path is the limit;
- ``discard``: frames the adapter dropped for another reason (its port
  buffer, a priority's buffer, steering, the link down);
- ``pause``: flow-control (802.3x, PFC) frames sent or received;
- ``error``: frames received or sent in error (FCS/CRC, length, symbol).

XDP's own verdicts (``xdp_drop``: a program said drop) are left out on
purpose: the packet study's receiver drops every frame with XDP by design.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MEANINGS = ("packets", "bytes", "ring", "discard", "pause", "error")
# what a nonzero count of each kind says, as a reader reads it
SAYS = {
    "ring": "frames the NIC had that the host did not take in time (no Rx buffer posted: ring or FIFO overran)",
    "discard": "frames the adapter discarded (port or priority buffer, steering, link down)",
    "pause": "flow-control frames (the link paused a sender)",
    "error": "frames in error (FCS/CRC, length, symbol)",
}


@dataclass(frozen=True)
class Stat:
    """What one counter is: its meaning, direction (rx/tx, "" when the
    counter has none) and queue (None: a device-wide counter)."""

    meaning: str
    direction: str = ""
    queue: int | None = None


_Q = r"(?P<dir>rx|tx)"
# per-queue packets and bytes, the shapes drivers print them in
_QUEUE = (
    rf"^{_Q}_queue_(?P<q>\d+)_(?P<what>packets|bytes)$",           # ixgbe, igb, ice, virtio_net < 6.10, ifb
    rf"^{_Q}-(?P<q>\d+)\.(?:rx_|tx_)?(?P<what>packets|bytes)$",    # i40e: rx-0.packets (older: rx-0.rx_packets)
    rf"^{_Q}(?P<q>\d+)_(?P<what>packets|bytes)$",                  # mlx5: rx0_packets
    rf"^\[(?P<q>\d+)\]: {_Q}_(?:ucast|mcast|bcast)_(?P<what>packets|bytes)$",   # bnxt_en: summed per queue
)
# device-wide and per-queue drops, pauses and errors every driver below may print
_GENERIC = (
    ("ring", r"^(rx_missed_errors|rx_missed|rx_no_buffer_count|rx_no_dma_resources|rx_fifo_errors|"
             r"rx_over_errors)$"),
    ("ring", r"^rx_queue_(?P<q>\d+)_drops$"),
    ("pause", r"^(rx|tx)_(pause|pause_frames|flow_control_xon|flow_control_xoff|xon|xoff)$"),
    ("pause", r"^(rx|tx)_flow_control_(xon|xoff)$"),
    ("error", r"^(rx|tx)_(errors|crc_errors|fcs_errors|length_errors|frame_errors|align_errors|"
              r"carrier_errors|aborted_errors)$"),
    ("discard", r"^(rx|tx)_(dropped|discards)$"),
)
DRIVERS: dict[str, tuple[tuple[str, str], ...]] = {
    "mlx5_core": (
        ("ring", r"^rx_out_of_buffer$"),
        ("ring", r"^rx(?P<q>\d+)?_buff_alloc_err$"),
        ("discard", r"^(rx|tx)_discards_phy$"),
        ("discard", r"^rx_prio\d+_discards$"),
        ("discard", r"^rx_steer_missed_packets$"),
        ("discard", r"^rx(?P<q>\d+)?_oversize_pkts_sw_drop$"),
        ("pause", r"^(rx|tx)_pause_ctrl_phy$"),
        ("pause", r"^(rx|tx)_prio\d+_pause$"),
        ("pause", r"^(rx|tx)_global_pause$"),
        ("error", r"^(rx_crc_errors_phy|rx_symbol_err_phy|tx_errors_phy|rx_in_range_len_errors_phy|"
                  r"rx_out_of_range_len_phy|rx_oversize_pkts_phy|rx_undersize_pkts_phy|rx_fragments_phy|"
                  r"rx_jabbers_phy)$"),
        ("error", r"^rx(?P<q>\d+)?_wqe_err$"),
    ),
    "ice": (
        # the VSI's and the port's receive-packet-buffer drops: no descriptor posted in time
        ("ring", r"^rx_dropped(\.nic)?$"),
        ("discard", r"^tx_dropped_link_down\.nic$"),
        ("pause", r"^link_(xon|xoff)_(rx|tx)\.nic$"),
        ("pause", r"^(rx|tx)_priority_\d+_(xon|xoff)\.nic$"),
        ("error", r"^(rx_crc_errors|rx_length_errors|rx_oversize|rx_undersize|rx_fragments|rx_jabber|"
                  r"illegal_bytes|tx_errors)(\.nic)?$"),
    ),
    "i40e": (
        ("ring", r"^(port\.)?rx_dropped$"),
        ("discard", r"^(veb\.)?(rx|tx)_discards$"),
        ("discard", r"^port\.tx_dropped_link_down$"),
        ("pause", r"^port\.link_(xon|xoff)_(rx|tx)$"),
        ("pause", r"^port\.(rx|tx)_priority_\d+_(xon|xoff)_count$"),
        ("error", r"^(port\.)?(rx_crc_errors|rx_length_errors|rx_oversize|rx_undersize|rx_fragments|rx_jabber|"
                  r"illegal_bytes|rx_errors|tx_errors)$"),
        ("error", r"^veb\.tx_errors$"),
    ),
    "bnxt_en": (
        ("ring", r"^\[(?P<q>\d+)\]: rx_discards$"),
        ("discard", r"^\[(?P<q>\d+)\]: tx_discards$"),
        ("discard", r"^(rx|tx)_total_discard_pkts$"),
        ("discard", r"^(rx|tx)_stat_discard$"),
        ("discard", r"^rx_discard_packets_cos\d+$"),
        ("pause", r"^(rx|tx)_(pause|pfc)_frames$"),
        ("error", r"^\[(?P<q>\d+)\]: (rx|tx)_errors$"),
        ("error", r"^(rx_fcs_err_frames|rx_align_err_frames|rx_jbr_frames|rx_mtu_err_frames|tx_err|"
                  r"tx_fcs_err_frames|rx_stat_err|tx_stat_error)$"),
    ),
    "virtio_net": (
        ("ring", r"^rx(?P<q>\d+)?_drops$"),       # 6.10 and later: rx0_drops
    ),
    "veth": (
        # a veth's queue counts only what its NAPI receive path took (an XDP
        # program attached, or GRO on): every packet of that path, XDP or not
        ("packets", r"^rx_queue_(?P<q>\d+)_xdp_packets$"),
        ("bytes", r"^rx_queue_(?P<q>\d+)_xdp_bytes$"),
        ("error", r"^rx_queue_(?P<q>\d+)_xdp_tx_errors$"),
        ("error", r"^tx_queue_(?P<q>\d+)_xdp_xmit_errors$"),
    ),
}
# what the generic per-queue shapes mean on drivers whose name for it differs
_NO_GENERIC_QUEUES = frozenset({"veth"})     # veth has no rx_queue_N_packets: its packets are the xdp ones
_COMPILED: dict[str, list[tuple[str, re.Pattern[str]]]] = {
    k: [(m, re.compile(p)) for m, p in v] for k, v in DRIVERS.items()}
_GENERIC_C = [(m, re.compile(p)) for m, p in _GENERIC]
_QUEUE_C = [re.compile(p) for p in _QUEUE]


def classify(driver: str | None, name: str) -> Stat | None:
    """What counter ``name`` of ``driver`` (``ethtool -i``'s name; None:
    unknown) means, or None when the table does not say."""
    for meaning, pat in _COMPILED.get(driver or "", []):
        m = pat.match(name)
        if m:
            return _stat(meaning, name, m)
    if (driver or "") not in _NO_GENERIC_QUEUES:
        for pat in _QUEUE_C:
            m = pat.match(name)
            if m:
                return Stat(m.group("what"), m.group("dir"), int(m.group("q")))
    for meaning, pat in _GENERIC_C:
        m = pat.match(name)
        if m:
            return _stat(meaning, name, m)
    return None


_DIR = re.compile(r"(^|[._\s-])(rx|tx)([._\d]|$)")


def _stat(meaning: str, name: str, m: re.Match[str]) -> Stat:
    q = m.groupdict().get("q")
    d = _DIR.search(name)
    direction = d.group(2) if d else ""
    return Stat(meaning, direction, int(q) if q is not None else None)


# an interface's queues are unevenly loaded when the busiest carries this much
# more than its fair share: the imbalance index below (0 even, 1 all on one
# queue) at 0.5 means the busiest queue sits half-way between its fair share
# and carrying everything (2 queues: a 75/25 split; 8 queues: one at 4.5x the
# mean) -- the core behind it runs out long before the others
IMBALANCE = 0.5
# fewer packets than this over a point on an interface (both directions'
# queues judged apart) is too little traffic to speak of a spread: ARP and
# neighbour discovery land wherever they land
IMBALANCE_MIN_PACKETS = 1000


def imbalance(per_queue: list[float]) -> float | None:
    """The imbalance index of one direction's queues: (max/mean - 1)/(n - 1),
    0 when every queue carried the same, 1 when one queue carried everything;
    None for fewer than two queues or nothing carried.

    Max over mean, not a variance: the busiest queue's core saturates first,
    so max/mean is the factor the spread costs (n queues carry at most
    n / (max/mean) queues' worth); dividing by n - 1 makes 2- and 64-queue
    interfaces comparable on one scale."""
    n = len(per_queue)
    total = sum(per_queue)
    if n < 2 or total <= 0:
        return None
    return (max(per_queue) / (total / n) - 1) / (n - 1)
