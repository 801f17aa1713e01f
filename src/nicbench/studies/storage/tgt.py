"""The storage study's iSCSI target: one tgtd for the study, in the
foreground on the study server, with one target per LUN (a null LUN 1:
the seed's null-rw), started before the first point and killed after the
last (``runner.stop``).
"""

from __future__ import annotations

import time
from pathlib import Path

from ...core.errors import ToolError, tail
from ...hosts.transport import read_output
from ...plan.studies.storage import StorageStudy
from ...records import RawOutput
from ...run.kit import PointEnv
from .context import StorageContext

IQN = "iqn.2026-11.org.nicbench"


def control_port(s: StorageStudy) -> int:
    """tgtd's management channel (``-C``): its socket lives in /var/run/tgtd,
    shared by every namespace, so each study's tgtd gets its own."""
    return 20000 + s.iscsi_port % 10000


def start(ctx: StorageContext, env: PointEnv, raw_dir: Path) -> None:
    """tgtd in the foreground, then one target per LUN with a null LUN 1 (the seed's null-rw)."""
    s, t = ctx.study, ctx.transports[ctx.server]
    out, err = raw_dir / "tgtd.out", raw_dir / "tgtd.err"
    ctx.raws += [RawOutput("target", ctx.server, "server", "tgtd", "stdout", env.rel(out)),
                 RawOutput("target", ctx.server, "server", "tgtd", "stderr", env.rel(err))]
    c = str(control_port(s))
    if t.run(["tgtadm", "-C", c, "--lld", "iscsi", "--op", "show", "--mode", "target"], timeout=10).returncode == 0:
        raise ToolError(f"another tgtd already answers on management port {c}", where=ctx.server,
                        hint="stop it, or give this study another iscsi_port (the port is derived from it)")
    ctx.targets.append(t.spawn(env.pinned(ctx.server, ["tgtd", "-f", "-C", c, "--iscsi",
                                                       f"portal={ctx.addresses[ctx.server]}:{s.iscsi_port}"]),
                               stdout=out, stderr=err))
    deadline = time.monotonic() + 10
    while True:
        r = t.run(["tgtadm", "-C", c, "--lld", "iscsi", "--op", "show", "--mode", "target"], timeout=10)
        if r.returncode == 0 and ctx.targets[0].poll() is None:
            ctx.tgt_up = True
            break
        if ctx.targets[0].poll() is not None or time.monotonic() > deadline:
            raise ToolError(f"tgtd did not start: {tail(read_output(err)) or tail(r.stderr)}", where=ctx.server)
        time.sleep(0.05)
    for lun in range(s.luns):
        for args in (["--op", "new", "--mode", "target", "--tid", str(lun + 1), "-T", f"{IQN}:lun{lun}"],
                     ["--op", "new", "--mode", "logicalunit", "--tid", str(lun + 1), "--lun", "1",
                      "--bstype", "null", "-b", f"/nicbench-null{lun}"],
                     ["--op", "bind", "--mode", "target", "--tid", str(lun + 1), "-I", "ALL"]):
            t.run(["tgtadm", "-C", c, "--lld", "iscsi", *args], timeout=10).check(
                f"tgtadm {' '.join(args[:4])}", hint="the target's log is in the run's raw/storage/tgtd.err")


def remove_sockets(ctx: StorageContext) -> None:
    """Our tgtd's control sockets in /var/run/tgtd (shared by every namespace,
    so they outlive the lab), once it is gone; never another tgtd's."""
    if ctx.tgt_up:
        ctx.tgt_up = False
        c = control_port(ctx.study)
        ctx.transports[ctx.server].run(["rm", "-f", f"/var/run/tgtd/socket.{c}", f"/var/run/tgtd/socket.{c}.lock"],
                                       timeout=10)
