"""trafgen (netsniff-ng, AF_PACKET) as a packet point's generator.

It sends nicbench's frames from a config file written on the generator
host, one sender process per CPU (forked by trafgen, pinned by the config)
under ``timeout -s INT``; its frames are counted by nbgen's XDP receiver.
trafgen prints only a summary at its end: one ``pkt.sent`` sample over the
whole run, its rate comes from the generator's interface counters.
"""

from __future__ import annotations

from typing import Any

from ....core.errors import ToolError, tail
from ....hosts.transport import END_MARK, Process, Transport, gate_time, read_output
from ....plan.studies.packets import PacketStudy
from ....records import Sample, Tags
from ....run.preflight import tool_version
from ....tools import frames as fr
from ....tools import trafgen as tool
from .engine import INSTALL, Found, Receiver, TxPort
from .nbgen import RECEIVER

# timeout's 124 is the duration ending it (130, or -2 seen from here: SIGINT); anything else is trafgen's own failure
ENDED = (0, 124, 130, -2)


class Trafgen:
    name = "trafgen"
    tool: str | None = "trafgen"
    caps: tuple[str, ...] = ("CAP_NET_RAW",)
    receiver: Receiver = RECEIVER
    own_frames = True
    forks = True
    link_wait_s = 0.0

    def locate(self, found: Found) -> list[str]:
        return []

    def check(self, host: str, t: Transport, found: Found) -> list[str]:
        found.versions["trafgen"] = tool_version(t, ["trafgen", "-v"], "trafgen", INSTALL)
        return []

    def check_generator(self, study: PacketStudy, host: str, kernel: str, ncpus: int) -> list[str]:
        return []

    def generator(self, tx: TxPort) -> tuple[list[str], str | None, list[int]]:
        if tx.rate:
            # trafgen paces with one sender process, on CPU 0, whatever --cpus says:
            # frames bound to other CPUs would never leave
            return (tool.argv(tx.dev, tx.conf, duration=tx.duration, cpus=1, rate=tx.rate, frame_size=tx.frame_size),
                    fr.trafgen_config(tx.frames), [0])
        return (tool.argv(tx.dev, tx.conf, duration=tx.duration, cpus=max(tx.pin) + 1, frame_size=tx.frame_size),
                fr.trafgen_config(tx.frames, tx.pin), tx.pin)

    def sent(self, trial_id: str, host: str, dev: str, pr: Process, tags: Tags,
             meta: dict[str, Any]) -> list[Sample]:
        o, e = read_output(pr.stdout_path), read_output(pr.stderr_path)
        rc = pr.poll()
        if rc not in ENDED:
            raise ToolError(f"trafgen on {dev} exited {rc}: {tail(e) or tail(o)}", where=host,
                            hint=tool.failure_hint(e))
        sm = tool.parse(o)
        if sm is None:
            raise ToolError(f"trafgen on {dev} printed no summary: {tail(e) or tail(o)}", where=host,
                            hint=tool.failure_hint(e))
        t0, t1 = gate_time(pr), gate_time(pr, END_MARK)
        if t0 is None or t1 is None:
            raise ToolError(f"trafgen on {dev}: the start gate recorded no time", where=host)
        meta["tx"][dev] = {"sent": sm.packets, "bytes": sm.bytes, "per_cpu": sm.per_cpu, "span": [t0, t1]}
        # one span for the whole run: the rate comes from the interface counters
        return [Sample(trial_id, "pkt.sent", float(sm.packets), "packets", t0, t1, tags)]


ENGINE = Trafgen()
