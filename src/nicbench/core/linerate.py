"""Line-rate ceilings: the most application data a link can carry.

Every Ethernet frame costs, on the wire, its bytes plus 20 that no counter
sees (preamble + SFD 8, inter-frame gap 12).  A frame is Ethernet header 14
(+4 with a VLAN tag), the L3 packet, FCS 4, and never shorter than 64 bytes::

    frame(L3)  = max(14 [+4] + L3 + 4, 64)
    wire(L3)   = frame(L3) + 8 + 12

TCP carries, in a full-MTU packet, ``MTU - IP header (20 v4 / 40 v6) - TCP
header 20 - options`` bytes; the timestamp option costs 12 (10 + 2 NOP of
padding).  The goodput ceiling is the link speed times payload / wire::

    ceiling = speed * payload(MTU) / wire(MTU)

Worked example, 400G, MTU 1500, IPv4, TCP with timestamps:
payload = 1500 - 20 - 20 - 12 = 1448, wire = 1500 + 14 + 4 + 20 = 1538,
ceiling = 400 * 1448 / 1538 = 376.59 Gbit/s (0.9415 of the link); without
timestamps 1460 / 1538 -> 379.71 Gbit/s.  Seed 000 reports ~378 Gbit/s per
direction: above the first, so its stack must have had timestamps off.

Frame rate at line rate for a frame size F (bytes from header to FCS):
``speed / ((F + 20) * 8)``; 64-byte frames at 40G: 59.52 Mpps.

Protocols on top of TCP add their own framing per record or PDU, carried in
the same byte stream: ``ceiling = tcp_ceiling * data / (data + overhead)``.
TLS records (AES-GCM): TLS 1.2 adds 5 header + 8 explicit nonce + 16 tag = 29
bytes per record, TLS 1.3 5 + 1 inner content type + 16 tag = 22.  Storage
PDUs per I/O of ``io`` bytes, counting the data direction only (the best case
a compliant peer allows, so it is a ceiling):

- NBD: read reply header 16; write request header 28;
- iSCSI: 48-byte basic header per data PDU (``ceil(io / max_pdu_data)`` PDUs,
  default MaxRecvDataSegmentLength 8192), status in the last Data-In (phase
  collapse); writes add the 48-byte command PDU; digests add 4 + 4 when on;
- NVMe/TCP: 24-byte C2HData / H2CData header per data PDU (default up to
  128 KiB each), success flag instead of a response capsule on reads; writes
  add the 72-byte command capsule;
- FCoE (not TCP): per FC frame Ethernet 14 + VLAN 4 + FCoE header 14 + FC
  header 24 + CRC 4 + EOF/reserved 4 + FCS 4 + preamble/IFG 20 = 88 bytes,
  up to 2112 data bytes per frame; with the data travel an FCP_RSP frame
  (24-byte payload) per read and an FCP_CMND frame (32-byte payload) per write.
  An FCoE link needs 2180-byte frames (the seed's "MTU 2180"), i.e. an
  Ethernet MTU of at least 2158; ``mtu`` here is that Ethernet MTU.

Writes take the best case a compliant peer allows: iSCSI ImmediateData (the
first data segment rides in the command PDU) and NVMe/TCP in-capsule data (in
the 72-byte command capsule), so they are ceilings.  A 50/50 read/write mix by
count moves equal bytes each way, so it is bounded by twice the slower of the
two, over both directions of a full-duplex link.

A bidirectional TCP ceiling is 2 x the one-way ceiling: an upper bound, since
each direction also carries the other's ACKs (with one 66-byte ACK per two
segments, about 97 % of it is reachable).

MB in storage results is 10^6 bytes, as in seed 004.  All rates are bit/s.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

ETH_HDR, VLAN_TAG, FCS, PREAMBLE_SFD, IFG, MIN_FRAME = 14, 4, 4, 8, 12, 64
IP_HDR = {4: 20, 6: 40}
TCP_HDR, TCP_TS_OPT, UDP_HDR = 20, 12, 8
UDP_MAX_PAYLOAD = {4: 65535 - 20 - 8, 6: 65535 - 8}      # the IPv4 total length / the IPv6 payload length
IPV6_FRAG_HDR = 8
MIN_MTU = {4: 576, 6: 1280}
MAX_MTU = 9216
TLS_OVERHEAD = {"1.2": 5 + 8 + 16, "1.3": 5 + 1 + 16}
TLS_MAX_RECORD = 16384
FC_HDR, FCOE_HDR, FC_CRC, FCOE_EOF, FC_MAX_PAYLOAD, FCP_RSP, FCP_CMND = 24, 14, 4, 4, 2112, 24, 32
FCOE_MAX_FRAME = 2180                                                   # header .. FCS, with VLAN tag
FCOE_MIN_MTU = FCOE_MAX_FRAME - ETH_HDR - VLAN_TAG - FCS               # 2158: the Ethernet payload

PROTOCOLS = ("tcp", "udp", "tls1.2", "tls1.3", "frames", "nbd", "iscsi", "nvme-tcp", "fcoe")


class ModelError(ValueError):
    """A parameter outside what the model (or Ethernet) allows; says why."""


_SPEED_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT])?\s*(b|bit|bits|bps|bit/s|bits/s|b/s)?\s*$",
                       re.IGNORECASE)
_SPEED_MULT = {"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


def parse_speed(text: str | int | float) -> float:
    """Link speed in bit/s: a number and a decimal prefix, case-insensitive.

    ``"10G"`` = ``"10g"`` = ``"10 Gb"`` = ``"10Gbit/s"`` = ``"10 Gbits/s"`` =
    ``"10000M"`` = 10e9.  Refused, with the reason: a bare number or a unit
    without a prefix (``"10"``, ``"100bps"``), bytes (``"10GB"``), binary
    prefixes (``"10Gi"``), zero or negative.
    """
    if isinstance(text, (bool, int, float)):
        raise ModelError(f"speed {text!r} has no unit; write it as a string with a decimal prefix, "
                         "e.g. \"10G\" or \"100M\" (bit/s)")
    s = str(text)
    if re.search(r"\d\s*[kKmMgGtT]?\s*B(?![iI][tT])", s) or re.search(r"[kKmMgGtT]i", s):
        raise ModelError(f"speed {s!r}: link speeds are bits per second with decimal prefixes "
                         "(\"10G\" = 10^9 bit/s); 'B' means bytes and 'Gi' is binary")
    m = _SPEED_RE.match(s)
    if m and m.group(2) is None:
        raise ModelError(f"speed {s!r} has no decimal prefix; write it as e.g. \"10G\", \"2.5G\" or "
                         "\"100M\" (bit/s)")
    if not m:
        raise ModelError(f"speed {s!r} is not a link speed; write a number and a decimal prefix: "
                         "\"100M\", \"2.5G\", \"10G\", \"400G\"")
    v = float(m.group(1)) * _SPEED_MULT[m.group(2).lower()]
    if v <= 0:
        raise ModelError(f"speed {s!r} must be above zero")
    return v


def format_speed(bps: float) -> str:
    for unit, mult in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if bps >= mult:
            v = bps / mult
            return f"{v:g}{unit}" if v == round(v, 3) else f"{v:.3f}{unit}"
    return f"{bps:g}"


def check_mtu(mtu: int, ip: int = 4) -> None:
    if ip not in IP_HDR:
        raise ModelError(f"IP version {ip} is not 4 or 6")
    if mtu < MIN_MTU[ip]:
        why = ("the datagram size every IPv4 host must accept; nicbench models no smaller links" if ip == 4
               else "the IPv6 minimum link MTU (RFC 8200)")
        raise ModelError(f"MTU {mtu} is below {MIN_MTU[ip]}, {why}")
    if mtu > MAX_MTU:
        raise ModelError(f"MTU {mtu} is above {MAX_MTU}, the largest jumbo MTU nicbench models "
                         "(a common switch limit)")


def frame_bytes(l3: int, vlan: bool = False) -> int:
    """Frame from header to FCS carrying ``l3`` bytes, padded to 64."""
    return max(ETH_HDR + (VLAN_TAG if vlan else 0) + l3 + FCS, MIN_FRAME)


def wire_bytes(l3: int, vlan: bool = False) -> int:
    """Bytes of wire time one frame carrying ``l3`` bytes takes (with preamble and IFG)."""
    return frame_bytes(l3, vlan) + PREAMBLE_SFD + IFG


def per_frame_uncounted() -> int:
    """Wire bytes per frame that interface byte counters (header..payload) leave out:
    FCS, preamble/SFD and IFG.  (Padding of frames under 64 bytes is not seen
    either: counters cannot tell, so short frames are slightly undercounted.)"""
    return FCS + PREAMBLE_SFD + IFG


@dataclass(frozen=True)
class Ceiling:
    """The most a link can carry for one protocol setting.  Rates in bit/s."""

    proto: str
    speed_bps: float
    mtu: int | None
    goodput_bps: float          # application bytes x 8 per second at line rate
    frames_per_s: float
    payload_per_frame: float    # application bytes per full frame (averaged for PDUs)
    wire_per_frame: float
    io_size: int | None = None
    iops: float | None = None
    notes: tuple[str, ...] = field(default=())
    fragments: int | None = None  # UDP: IP fragments per datagram, when it does not fit one packet

    @property
    def efficiency(self) -> float:
        return self.goodput_bps / self.speed_bps

    @property
    def mb_per_s(self) -> float:
        """Goodput in MB/s, MB = 10^6 bytes."""
        return self.goodput_bps / 8 / 1e6

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(efficiency=self.efficiency, goodput_gbps=self.goodput_bps / 1e9,
                 mpps=self.frames_per_s / 1e6, mb_per_s=self.mb_per_s, speed=format_speed(self.speed_bps))
        return d


def frame_rate(speed_bps: float, frame_size: int = 64) -> float:
    """Frames per second at line rate; ``frame_size`` counts header..FCS, any VLAN
    tag included (64 = minimum)."""
    if frame_size < MIN_FRAME:
        raise ModelError(f"frame size {frame_size} is below the Ethernet minimum of 64 bytes")
    if frame_size > MAX_MTU + ETH_HDR + VLAN_TAG + FCS:
        raise ModelError(f"frame size {frame_size} is larger than a {MAX_MTU}-byte jumbo frame")
    return speed_bps / ((frame_size + PREAMBLE_SFD + IFG) * 8)


def frames(speed_bps: float, frame_size: int = 64) -> Ceiling:
    """Small-frame line rate: goodput counts the frames' bytes (header..FCS)."""
    pps = frame_rate(speed_bps, frame_size)
    return Ceiling("frames", speed_bps, None, pps * frame_size * 8, pps, frame_size,
                   frame_size + PREAMBLE_SFD + IFG, notes=(f"{frame_size}-byte frames",))


def tcp(speed_bps: float, mtu: int = 1500, *, ip: int = 4, timestamps: bool = True,
        vlan: bool = False) -> Ceiling:
    check_mtu(mtu, ip)
    payload = mtu - IP_HDR[ip] - TCP_HDR - (TCP_TS_OPT if timestamps else 0)
    wire = wire_bytes(mtu, vlan)
    fps = speed_bps / (wire * 8)
    return Ceiling("tcp", speed_bps, mtu, fps * payload * 8, fps, payload, wire,
                   notes=(f"IPv{ip}", "TCP timestamps on" if timestamps else "TCP timestamps off",
                          *(["VLAN tag"] if vlan else [])))


def udp(speed_bps: float, mtu: int = 1500, *, ip: int = 4, vlan: bool = False,
        payload: int | None = None) -> Ceiling:
    """UDP payload at line rate for ``payload``-byte datagrams (default: the
    largest that fits one packet).  A datagram larger than one packet travels
    as IP fragments (see :func:`udp_fragments`), each a frame of its own."""
    check_mtu(mtu, ip)
    most = mtu - IP_HDR[ip] - UDP_HDR
    p = most if payload is None else payload
    if not 1 <= p <= UDP_MAX_PAYLOAD[ip]:
        raise ModelError(f"UDP payload {p} is outside 1..{UDP_MAX_PAYLOAD[ip]}, what one IPv{ip} datagram carries")
    if p > most:
        frags = udp_fragments(p, mtu, ip)
        wire = sum(wire_bytes(f, vlan) for f in frags)
        dps = speed_bps / (wire * 8)                       # datagrams per second
        n = len(frags)
        return Ceiling("udp", speed_bps, mtu, dps * p * 8, dps * n, p / n, wire / n,
                       notes=(f"IPv{ip}", f"{p}-byte datagrams", f"fragmented: {n} IP fragments each"),
                       fragments=n)
    wire = wire_bytes(p + UDP_HDR + IP_HDR[ip], vlan)
    fps = speed_bps / (wire * 8)
    return Ceiling("udp", speed_bps, mtu, fps * p * 8, fps, p, wire, notes=(f"IPv{ip}", f"{p}-byte datagrams"))


def udp_fragments(payload: int, mtu: int = 1500, ip: int = 4) -> list[int]:
    """The L3 sizes of the packets one UDP datagram of ``payload`` bytes takes.

    The UDP header and payload are split into fragments whose data is a
    multiple of 8 bytes (the last excepted), each behind its own IP header
    (IPv6: and an 8-byte fragment header).  A datagram that fits one packet
    is one packet: [payload + 8 + IP header].
    """
    data = payload + UDP_HDR
    if data + IP_HDR[ip] <= mtu:
        return [data + IP_HDR[ip]]
    hdr = IP_HDR[ip] + (IPV6_FRAG_HDR if ip == 6 else 0)
    per = (mtu - hdr) // 8 * 8
    n = math.ceil(data / per)
    return [hdr + per] * (n - 1) + [hdr + data - (n - 1) * per]


def _over_tcp(base: Ceiling, proto: str, data: float, overhead: float, io: int | None,
              notes: tuple[str, ...]) -> Ceiling:
    share = data / (data + overhead)
    good = base.goodput_bps * share
    return Ceiling(proto, base.speed_bps, base.mtu, good, base.frames_per_s, base.payload_per_frame * share,
                   base.wire_per_frame, io, good / 8 / io if io else None, base.notes + notes)


def tls(speed_bps: float, mtu: int = 1500, *, version: str = "1.3", record: int = TLS_MAX_RECORD,
        ip: int = 4, timestamps: bool = True, vlan: bool = False) -> Ceiling:
    if version not in TLS_OVERHEAD:
        raise ModelError(f"TLS version {version!r}: the model knows 1.2 and 1.3")
    if not 1 <= record <= TLS_MAX_RECORD:
        raise ModelError(f"TLS record size {record} is outside 1..{TLS_MAX_RECORD}")
    base = tcp(speed_bps, mtu, ip=ip, timestamps=timestamps, vlan=vlan)
    return _over_tcp(base, f"tls{version}", record, TLS_OVERHEAD[version], None,
                     (f"TLS {version} AES-GCM, {record}-byte records (+{TLS_OVERHEAD[version]} B each)",))


def _check_io(io: int, op: str) -> None:
    if io <= 0:
        raise ModelError(f"I/O size {io} must be above zero")
    if op not in ("read", "write", "readwrite"):
        raise ModelError(f"op {op!r}: use read, write or readwrite")


def storage(speed_bps: float, mtu: int, transport: str, io_size: int, *, op: str = "read", ip: int = 4,
            timestamps: bool = True, vlan: bool = False, max_pdu_data: int | None = None,
            digests: bool = False) -> Ceiling:
    """Ceiling for block I/O of ``io_size`` bytes over NBD, iSCSI, NVMe/TCP or FCoE.

    ``readwrite`` (50/50) uses both directions of the full-duplex link: its
    ceiling is the read ceiling plus the write ceiling.
    """
    _check_io(io_size, op)
    if op == "readwrite":
        r = storage(speed_bps, mtu, transport, io_size, op="read", ip=ip, timestamps=timestamps, vlan=vlan,
                    max_pdu_data=max_pdu_data, digests=digests)
        w = storage(speed_bps, mtu, transport, io_size, op="write", ip=ip, timestamps=timestamps, vlan=vlan,
                    max_pdu_data=max_pdu_data, digests=digests)
        slow = min(r, w, key=lambda c: c.goodput_bps)
        good = 2 * slow.goodput_bps       # equal I/O counts: equal bytes each way
        return Ceiling(transport, speed_bps, mtu, good, r.frames_per_s + w.frames_per_s, slow.payload_per_frame,
                       slow.wire_per_frame, io_size, good / 8 / io_size,
                       (f"{transport} 50/50 read/write by count: 2 x the slower direction "
                        f"({'read' if slow is r else 'write'}), both directions of a full-duplex link; "
                        "efficiency is against one direction's speed",))
    if transport == "fcoe":
        return _fcoe(speed_bps, mtu, io_size, op)
    base = tcp(speed_bps, mtu, ip=ip, timestamps=timestamps, vlan=vlan)
    if transport == "nbd":
        ovh, note = (16, "NBD read reply header 16 B") if op == "read" else (28, "NBD write request 28 B")
    elif transport == "iscsi":
        seg = max_pdu_data or 8192
        n = math.ceil(io_size / seg)
        bhs = 48 + (4 if digests else 0) + (4 if digests else 0)    # header digest + data digest
        ovh = n * bhs       # writes: ImmediateData puts the first segment in the command PDU
        note = (f"iSCSI {n} PDU(s) of <= {seg} data bytes, 48 B header each"
                + (" (+4+4 digests)" if digests else "") + ("; command PDU carries the first segment"
                                                            if op == "write" else "; status in last Data-In"))
    elif transport == "nvme-tcp":
        seg = max_pdu_data or 131072
        n = math.ceil(io_size / seg)
        dg = 8 if digests else 0
        if op == "read":
            ovh = n * (24 + dg)
            note = f"NVMe/TCP {n} C2HData PDU(s) of 24 B header, success flag instead of a response"
        else:   # in-capsule data: the 72-byte command capsule carries the first chunk
            ovh = (72 + dg) + (n - 1) * (24 + dg)
            note = f"NVMe/TCP 72 B command capsule with in-capsule data, {n - 1} more H2CData PDU(s)"
    else:
        raise ModelError(f"storage transport {transport!r}: use nbd, iscsi, nvme-tcp or fcoe")
    return _over_tcp(base, transport, io_size, ovh, io_size, (note, op))


def _fcoe(speed_bps: float, mtu: int, io_size: int, op: str) -> Ceiling:
    if mtu < FCOE_MIN_MTU:
        raise ModelError(f"FCoE needs {FCOE_MAX_FRAME}-byte frames, i.e. an Ethernet MTU of at least "
                         f"{FCOE_MIN_MTU} ('baby jumbo'); got {mtu}")
    per_frame = PREAMBLE_SFD + IFG + ETH_HDR + VLAN_TAG + FCOE_HDR + FC_HDR + FC_CRC + FCOE_EOF + FCS  # 88
    n = math.ceil(io_size / FC_MAX_PAYLOAD)
    wire = io_size + n * per_frame
    frames_ = n
    # the frames that travel with the data: FCP_RSP (target -> initiator) on
    # reads, FCP_CMND (initiator -> target) on writes
    wire += per_frame + (FCP_RSP if op == "read" else FCP_CMND)
    frames_ += 1
    ios = speed_bps / (wire * 8)
    good = ios * io_size * 8
    return Ceiling("fcoe", speed_bps, mtu, good, ios * frames_, io_size / frames_, wire / frames_, io_size, ios,
                   (f"FCoE: {n} data frame(s) of <= {FC_MAX_PAYLOAD} B, {per_frame} B per frame, "
                    + ("FCP_RSP frame" if op == "read" else "FCP_CMND frame"), op))


def ceiling(proto: str, speed_bps: float, mtu: int = 1500, **kw: Any) -> Ceiling:
    """One entry point for the CLI and reports; ``proto`` is one of :data:`PROTOCOLS`."""
    if proto == "tcp":
        return tcp(speed_bps, mtu, **{k: kw[k] for k in ("ip", "timestamps", "vlan") if k in kw})
    if proto == "udp":
        return udp(speed_bps, mtu, **{k: kw[k] for k in ("ip", "vlan", "payload") if k in kw})
    if proto in ("tls1.2", "tls1.3"):
        return tls(speed_bps, mtu, version=proto[3:],
                   **{k: kw[k] for k in ("record", "ip", "timestamps", "vlan") if k in kw})
    if proto == "frames":
        return frames(speed_bps, kw.get("frame_size", 64))
    if proto in ("nbd", "iscsi", "nvme-tcp", "fcoe"):
        if not kw.get("io_size"):
            raise ModelError(f"{proto} needs an I/O size")
        return storage(speed_bps, mtu, proto, kw["io_size"],
                       **{k: kw[k] for k in ("op", "ip", "timestamps", "vlan", "max_pdu_data", "digests")
                          if k in kw})
    raise ModelError(f"protocol {proto!r}: use one of {', '.join(PROTOCOLS)}")
