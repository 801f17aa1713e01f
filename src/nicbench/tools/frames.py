"""Test frames for the packet-rate study (pure): Ethernet + IPv4/IPv6 + UDP.

Sizes follow RFC 2544 and the seed: a "64-byte frame" counts from the
destination MAC to the FCS, so the bytes a generator hands the NIC are
``size - 4`` (the NIC appends the FCS).  Both engines send exactly these
bytes: nbgen takes them as hex, trafgen as a byte-list config.  Checksums are
filled in (IPv4 header, UDP over IPv4 and IPv6), so a receiver that checks
them counts the frames as valid.
"""

from __future__ import annotations

import ipaddress
import struct
from typing import Any

from ..core.linerate import FCS, MIN_FRAME

PAYLOAD_MARK = b"nicbench"       # start of every payload: the frames are ours in a capture
UDP_PORT = 9                     # discard


def _csum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of ``data``."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def mac_bytes(mac: str) -> bytes:
    parts = mac.split(":")
    if len(parts) != 6:
        raise ValueError(f"not a MAC address: {mac!r}")
    return bytes(int(p, 16) for p in parts)


def l3_overhead(ip: int) -> int:
    """Ethernet header + IP header + UDP header, bytes."""
    return 14 + (20 if ip == 4 else 40) + 8


def min_frame(ip: int) -> int:
    """The smallest frame (with FCS) that holds the headers: 64 for IPv4,
    66 for IPv6 (14 + 40 + 8 + 4 = 66 > 64)."""
    return max(MIN_FRAME, l3_overhead(ip) + FCS)


def udp_frame(*, src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, size: int,
              sport: int = 1024, dport: int = UDP_PORT) -> bytes:
    """One frame of ``size`` bytes on the wire counting the FCS (so ``size - 4`` returned)."""
    src, dst = ipaddress.ip_address(src_ip), ipaddress.ip_address(dst_ip)
    if src.version != dst.version:
        raise ValueError(f"{src_ip} and {dst_ip} are not the same IP version")
    ip = src.version
    if size < min_frame(ip):
        raise ValueError(f"a {size}-byte frame cannot hold Ethernet + IPv{ip} + UDP headers "
                         f"(at least {min_frame(ip)} bytes with the FCS)")
    payload_len = size - FCS - l3_overhead(ip)
    payload = (PAYLOAD_MARK * (payload_len // len(PAYLOAD_MARK) + 1))[:payload_len]
    udp_len = 8 + payload_len
    eth = mac_bytes(dst_mac) + mac_bytes(src_mac)
    if ip == 4:
        iph = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 0, 0x4000, 64, 17, 0,
                          src.packed, dst.packed)
        iph = iph[:10] + struct.pack("!H", _csum(iph)) + iph[12:]
        pseudo = src.packed + dst.packed + struct.pack("!BBH", 0, 17, udp_len)
        l3 = iph
        ethertype = b"\x08\x00"
    else:
        l3 = struct.pack("!IHBB16s16s", 6 << 28, udp_len, 17, 64, src.packed, dst.packed)
        pseudo = src.packed + dst.packed + struct.pack("!IxxxB", udp_len, 17)
        ethertype = b"\x86\xdd"
    udp = struct.pack("!HHHH", sport, dport, udp_len, 0) + payload
    c = _csum(pseudo + udp) or 0xFFFF            # 0 means "no checksum": send its complement
    udp = udp[:6] + struct.pack("!H", c) + udp[8:]
    return eth + ethertype + l3 + udp


def thread_frames(count: int, **kw: Any) -> list[bytes]:
    """One frame per generator thread, differing in the UDP source port, so a
    multi-queue receiver (RSS) spreads the threads' flows over its queues."""
    base = int(kw.pop("sport", 1024))
    return [udp_frame(sport=base + i, **kw) for i in range(count)]


def trafgen_config(frames: list[bytes], cpus: list[int] | None = None) -> str:
    """A trafgen packet config sending ``frames`` byte for byte; with ``cpus``,
    frame i only from CPU ``cpus[i]`` (trafgen forks one sender per CPU from
    CPU 0 up and pins it there: without this, two trafgens would share CPU 0)."""
    out = []
    for i, f in enumerate(frames):
        prefix = f"cpu({cpus[i]}): " if cpus else ""
        out.append(prefix + "{ " + ", ".join(f"0x{b:02x}" for b in f) + " }\n")
    return "".join(out)
