"""``nicbench linerate``: the line-rate ceiling of a link, from the model alone."""

from __future__ import annotations

from typing import Any

import click

from ..core import linerate as lr
from ..core.errors import InputError
from ..core.units import UnitError, parse_size
from .options import emit, json_option, refuse_unused

_STORAGE = ("nbd", "iscsi", "nvme-tcp", "fcoe")
_TCP_BASED = ("tcp", "tls1.2", "tls1.3", "nbd", "iscsi", "nvme-tcp")
# option -> the --proto values whose ceiling uses it (any other --proto would ignore it)
APPLIES: dict[str, tuple[str, ...]] = {
    "mtu": ("tcp", "udp", "tls1.2", "tls1.3", *_STORAGE),
    "ip": ("udp", *_TCP_BASED),
    "no_timestamps": _TCP_BASED,
    "vlan": ("udp", *_TCP_BASED),
    "frame_size": ("frames",),
    "record": ("tls1.2", "tls1.3"),
    "io_size": _STORAGE,
    "op": _STORAGE,
}
_WHY = {("vlan", "frames"): "a frame size counts header to FCS, any VLAN tag included",
        ("mtu", "frames"): "a frame's size is --frame-size, from header to FCS"}


@click.command()
@click.option("--speed", required=True, help="Link speed, decimal bit/s: 10G, 2.5G, 400G, 10000M.")
@click.option("--mtu", type=int, default=None, help="Ethernet MTU (default 1500; fcoe: 2158, for 2180-byte frames).")
@click.option("--proto", type=click.Choice(["tcp", "udp", "tls1.2", "tls1.3", "frames", "nbd", "iscsi",
                                             "nvme-tcp", "fcoe"]), default="tcp", show_default=True)
@click.option("--ip", type=click.Choice(["4", "6"]), default="4", show_default=True)
@click.option("--no-timestamps", is_flag=True, help="TCP without the timestamp option (12 B more payload).")
@click.option("--vlan", is_flag=True, help="Frames carry an 802.1Q tag (4 B).")
@click.option("--frame-size", default="64", show_default=True, help="frames: bytes from header to FCS.")
@click.option("--record", default="16K", show_default=True, help="tls: record size.")
@click.option("--io-size", default=None, help="nbd/iscsi/nvme-tcp/fcoe: I/O size, e.g. 4K.")
@click.option("--op", type=click.Choice(["read", "write", "readwrite"]), default="read", show_default=True)
@json_option
@click.pass_context
def linerate(ctx: click.Context, speed: str, mtu: int | None, proto: str, ip: str, no_timestamps: bool,
             vlan: bool, frame_size: str, record: str, io_size: str | None, op: str) -> None:
    """The line-rate ceiling: most goodput and frame rate a link allows.

    The formula, with a worked example, is in nicbench.core.linerate.
    """

    def size(v: str, what: str) -> int:
        try:
            return parse_size(v)
        except UnitError as e:
            raise InputError(str(e), where=what) from None
    for name, protos in APPLIES.items():
        refuse_unused(ctx, name, proto in protos,
                      f"applies to --proto {', '.join(protos)} only: the --proto {proto} ceiling would ignore it",
                      _WHY.get((name, proto)) or (f"add --proto {protos[0]}" if len(protos) == 1 else
                                                  f"give --proto {' or '.join(protos)}, or leave it out"))
    if mtu is None:
        mtu = lr.FCOE_MIN_MTU if proto == "fcoe" else 1500
    try:
        bps = lr.parse_speed(speed)
        kw: dict[str, Any] = {"ip": int(ip), "vlan": vlan}
        if proto in ("tcp", "tls1.2", "tls1.3", "nbd", "iscsi", "nvme-tcp"):
            kw["timestamps"] = not no_timestamps
        if proto == "frames":
            kw = {"frame_size": size(frame_size, "--frame-size")}
        if proto.startswith("tls"):
            kw["record"] = size(record, "--record")
        if proto in ("nbd", "iscsi", "nvme-tcp", "fcoe"):
            if io_size is None:
                raise InputError(f"--proto {proto} needs --io-size", where="--io-size", hint="e.g. --io-size 4K")
            kw["io_size"] = size(io_size, "--io-size")
            kw["op"] = op
            if proto == "fcoe":
                kw = {"io_size": kw["io_size"], "op": op}
        c = lr.ceiling(proto, bps, mtu, **kw)
    except lr.ModelError as e:
        raise InputError(str(e), where="linerate",
                         hint="speeds: 10G, 2.5G, 10000M; MTU 576..9216 (IPv6 >= 1280); frames >= 64") from None
    lines = [f"{proto} over {lr.format_speed(bps)}bit/s" + (f", MTU {mtu}" if proto != "frames" else ""),
             f"  goodput ceiling  {c.goodput_bps / 1e9:.3f} Gbps ({c.efficiency * 100:.2f} % of the link, "
             f"{c.mb_per_s:.0f} MB/s with MB = 10^6)",
             f"  frame rate       {c.frames_per_s / 1e6:.3f} Mpps",
             f"  per frame        {c.payload_per_frame:.1f} payload bytes in {c.wire_per_frame:.1f} wire bytes"]
    if c.iops:
        lines.append(f"  I/O rate         {c.iops:,.0f} IOPS of {c.io_size} B")
    lines += [f"  ({n})" for n in c.notes]
    emit(ctx, c.to_dict(), "\n".join(lines))

