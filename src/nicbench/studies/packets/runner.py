"""The packet-rate study (seed 003): a generator, a receiver, back-to-back ports.

Per point and port: ``nbgen rx`` on the receiver attaches its XDP counter
(through a BPF link, so it cannot outlive the process) and says so; then the
generator's engine starts behind the start barrier -- nbgen (XDP live
frames, one thread per queue) or trafgen (AF_PACKET) -- sending the same
frames for ``duration`` seconds and stopping by itself.  After a short drain
the receivers are stopped; each prints its final per-CPU counts and
detaches.  Received frames come from the receiver's XDP counter, sent
frames from nbgen's own XDP counter or, for trafgen, the generator's
interface counters; the interface counters of both ends are sampled beside
them for every engine.

With ``engine = "pkt-gen"`` (netmap, on FreeBSD or on Linux with
/dev/netmap) both ends are netmap's pkt-gen: ``pkt-gen -f rx`` on each
receiver port, counting every frame its RX rings get, started first and
waited for ("Ready..."); then ``pkt-gen -f tx`` behind the start barrier
under ``timeout -s INT``; sent and received frames are the two pkt-gen's own
counts per report interval (:mod:`nicbench.tools.pktgen`).  Not run here:
this machine has no netmap, so that path is tested on fakes answering
recorded pkt-gen output only.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from ...core.errors import NicbenchError, PreflightError, ToolError, tail
from ...hosts.base import Hosts
from ...hosts.factparse_freebsd import parse_ifconfig
from ...hosts.transport import (
    END_MARK,
    Process,
    Transport,
    gate_time,
    host_clock_offset,
    host_os,
    read_output,
    tool_stderr,
)
from ...native.build import nbgen_path
from ...plan.model import Plan
from ...plan.studies.packets import PacketStudy
from ...records import RawOutput, Sample, TrialRecord, TrialSpec, make_tags
from ...run import ratesearch
from ...run.kit import PointEnv, PointGuard, PointSamplers, release_together
from ...run.preflight import problems_found, tool_version
from ...run.study import Preflight, TrialOutcome
from ...sampling.sampler import NetTarget, child_pids, tool_procs
from ...tools import frames as fr
from ...tools import nbgen, pktgen, trafgen
from ...tuning.knobs import cpu_set
from .analysis import packet_trial  # the search needs each step's loss: the one upward import (see ARCHITECTURE.md)
from .context import PacketContext, port_ifname, port_ips

INSTALL = ("run 'nicbench setup' (it builds nbgen, naming any compiler or library it lacks); trafgen: "
           "apt-get install netsniff-ng")
INSTALL_ANYWHERE = (INSTALL + "; on a host that does not share this machine's files: install nicbench there, run "
                    "'nicbench setup' and put the nbgen it prints on that host's PATH (it needs libbpf1)")
# capability bits (linux/capability.h)
CAPS = {"CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13, "CAP_SYS_ADMIN": 21, "CAP_PERFMON": 38, "CAP_BPF": 39}
DRAIN_S = 0.3            # after the generators end, before the receivers' last count
# nbgen's own counts, s between reads: the window's edges fall inside a read's
# span, which the analysis spreads evenly; when the rate moves within it (the
# start, bursts on shared CPUs) that share is misplaced -- 1 % seen at 0.25 s
COUNT_INTERVAL = 0.05
PKTGEN_WAIT_S = 2        # pkt-gen -w: the link's reset on entering netmap mode (pkt-gen's own default)
PKTGEN_INSTALL = ("pkt-gen comes with netmap: FreeBSD builds it from /usr/src/tools/tools/netmap (make; "
                  "kldload netmap if the kernel lacks 'device netmap'); Linux: netmap's own build "
                  "(luigirizzo/netmap, apps/pkt-gen) and its kernel module")
# one command: is netmap there, may this user open it, and where is pkt-gen
_NETMAP = ('[ -e /dev/netmap ] && echo netmap=yes || echo netmap=no; '
           '[ -r /dev/netmap ] && [ -w /dev/netmap ] && echo open=yes || echo open=no; '
           'p=$(command -v pkt-gen) && echo "pkt-gen=$p" || echo pkt-gen=')


def receivers(engines: Sequence[str]) -> list[str]:
    """The receivers a set of engines needs: pkt-gen's points count with pkt-gen
    rx (netmap on both ends), the others with nbgen's XDP counter."""
    return (["nbgen"] if any(e != "pkt-gen" for e in engines) else []) + (["pkt-gen"] if "pkt-gen" in engines
                                                                            else [])


def netmap_problems(host: str, out: str) -> list[str]:
    """What the :data:`_NETMAP` check says is missing for pkt-gen on ``host``
    (pure; one line each, naming the host)."""
    kv = dict(ln.split("=", 1) for ln in out.splitlines() if "=" in ln)
    if kv.get("netmap") != "yes":
        return [f"{host}: pkt-gen needs netmap, and this host has no /dev/netmap ({PKTGEN_INSTALL})"]
    out_ = []
    if kv.get("open") != "yes":
        out_.append(f"{host}: /dev/netmap is not readable and writable by this user (run as root)")
    if not kv.get("pkt-gen"):
        out_.append(f"{host}: pkt-gen is not installed ({PKTGEN_INSTALL})")
    return out_


def _caps(t: Transport) -> int | None:
    """The effective capability mask of a process started through ``t``."""
    try:
        r = t.run(["cat", "/proc/self/status"], timeout=10)
    except NicbenchError:
        return None
    for line in r.stdout.splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return None


def missing_caps(mask: int | None, engine: str) -> list[str]:
    """What ``engine`` needs that ``mask`` lacks (CAP_SYS_ADMIN stands in for
    CAP_BPF/CAP_PERFMON on kernels before 5.8)."""
    if mask is None:
        return []
    need = ["CAP_NET_ADMIN", "CAP_BPF", "CAP_PERFMON"] if engine == "nbgen" else ["CAP_NET_RAW"]
    has = {n for n, bit in CAPS.items() if mask >> bit & 1}
    if "CAP_SYS_ADMIN" in has:
        has |= {"CAP_BPF", "CAP_PERFMON"}
    return [n for n in need if n not in has]


def _link(t: Transport, dev: str) -> dict | None:
    r = t.run(["ip", "-j", "-d", "link", "show", "dev", dev], timeout=10)
    if r.returncode != 0:
        return None
    try:
        return json.loads(r.stdout)[0]
    except (ValueError, IndexError):
        return None


def xdp_attached(info: dict | None) -> str | None:
    """The XDP program an ``ip -j link`` entry shows attached, as text, or None."""
    x = (info or {}).get("xdp")
    if not x:
        return None
    prog = x.get("prog") or {}
    return f"id {prog.get('id', '?')} ({prog.get('name', '?')}, mode {x.get('mode', '?')})"


class PacketRunner:
    """The packet study as the session drives it (see ``run.study.StudyRunner``)."""

    kind = "packets"

    def __init__(self, plan: Plan, hosts: Hosts):
        self.plan = plan
        self.transports = hosts.transports()
        self.addresses = {h.name: h.ip for h in hosts.spec.hosts}
        self.ctx: PacketContext | None = None

    def preflight(self) -> Preflight:
        self.ctx, warnings = preflight(self.plan, self.transports, self.addresses)
        s, c, v = self.ctx.study, self.ctx, self.ctx.versions
        return Preflight(
            tools=tuple(e for e in s.engines if e != "nbgen") + ("ethtool",), warnings=tuple(warnings),
            meta={"engine": " + ".join(s.engines), "engine_version": ", ".join(f"{k} {x}" for k, x in v.items()),
                  "versions": v, "engines": s.engines, "line_rate_bps": s.line_rate, "rate": s.rate,
                  "xdp_mode": s.xdp_mode, "generator": c.server, "receiver": c.receiver,
                  "generator_kernel": c.kernel, "trim": s.trim, "udp_port": s.udp_port,
                  "search": s.search, "loss_threshold": s.loss_threshold,
                  "shaping": "none: XDP transmit and trafgen's qdisc bypass go around tc; line_rate is nominal"})

    def start(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        return []

    def trial(self, env: PointEnv, spec: TrialSpec, raw_dir: Path) -> TrialOutcome:
        assert self.ctx is not None, "preflight first"
        return TrialOutcome(*run_trial(self.ctx, env, spec, raw_dir))

    def stop(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        return []


def preflight(plan: Plan, transports: dict[str, Transport],
              addresses: dict[str, str]) -> tuple[PacketContext, list[str]]:
    """Every problem at once: engines built and runnable, privileges,
    interfaces present with room for the frames, no XDP program already
    on a receiver port, a kernel with live frames."""
    s = plan.study
    assert isinstance(s, PacketStudy)
    gen, rx = plan.server, plan.clients[0]
    problems: list[str] = []
    warnings: list[str] = []
    versions: dict[str, str] = {}
    devs = {h: list(v) for h, v in (s.interfaces or {}).items()}
    hosts: dict[str, list[str]] = {gen: list(s.engines), rx: receivers(s.engines)}
    exe = nbgen.binary() if any("nbgen" in e for e in hosts.values()) else None
    if exe is None and any("nbgen" in e for e in hosts.values()):
        problems.append(f"nbgen is not built for this nicbench (looked for {nbgen_path()}, $NICBENCH_NBGEN and "
                        f"nbgen on PATH): {INSTALL}")
    exes: dict[str, str] = {}
    for host, engines in hosts.items():
        t = transports[host]
        if exe and "nbgen" in engines:
            exes[host] = _nbgen_on(t, exe)
        for eng in dict.fromkeys(engines):
            try:
                if eng == "nbgen" and exe:
                    versions["nbgen"] = tool_version(t, [exes[host], "version"], "nbgen", INSTALL_ANYWHERE)
                elif eng == "trafgen":
                    versions["trafgen"] = tool_version(t, ["trafgen", "-v"], "trafgen", INSTALL)
                elif eng == "pkt-gen":
                    got = t.run(["sh", "-c", _NETMAP], timeout=10).stdout
                    lack = netmap_problems(host, got)
                    problems += lack
                    if not lack:        # pkt-gen prints no version: its path says which one ran
                        versions["pkt-gen"] = got.rsplit("pkt-gen=", 1)[-1].strip()
            except PreflightError as e:
                problems.append(f"{host}: {e.message}")
        mask = _caps(t) if host_os(t) == "Linux" else None     # CapEff is Linux's; FreeBSD: root or not
        for eng in dict.fromkeys(engines):
            lack = missing_caps(mask, eng) if eng != "pkt-gen" else []
            if lack:
                problems.append(f"{host}: {eng} needs {', '.join(lack)}, which this user lacks (run as root)")
    macs: dict[tuple[str, int], str] = {}
    biggest = max(s.frame_sizes)
    for i in range(max(s.ports)):
        for host in (gen, rx):
            dev = PacketContext.dev_of(devs, host, i)
            info = _link(transports[host], dev) if host_os(transports[host]) == "Linux" else \
                _link_freebsd(transports[host], dev)
            if info is None:
                problems.append(f"{host}: interface {dev} does not exist (port {i + 1} of {max(s.ports)})")
                continue
            macs[(host, i)] = str(info.get("address", ""))
            mtu = int(info.get("mtu") or 0)
            if biggest > mtu + 18:
                problems.append(f"{host}: {dev} has MTU {mtu}: a {biggest}-byte frame needs MTU {biggest - 18}")
            if host == rx and "nbgen" in hosts[rx]:
                on = xdp_attached(info)
                if on:
                    problems.append(f"{rx}: {dev} already has an XDP program attached, {on}: remove it "
                                    f"(ip link set dev {dev} xdp off) or stop what attached it")
                qs = int(info.get("num_rx_queues") or 1)
                if qs < max(s.threads):
                    warnings.append(f"{rx}: {dev} has {qs} receive queue(s) for up to {max(s.threads)} "
                                    "generator threads: threads share queues")
    kernel = transports[gen].run(["uname", "-r"], timeout=10).stdout.strip()
    if "nbgen" in s.engines and tuple(int(x) for x in kernel.split(".")[:2] if x.isdigit()) < (5, 18):
        problems.append(f"{gen}: kernel {kernel} has no XDP live frames (5.18 or later): use engines = [\"trafgen\"]")
    online = _online(transports[gen])
    cpus = len(online)
    if max(s.threads) * max(s.ports) > cpus:
        warnings.append(f"{gen}: {max(s.threads) * max(s.ports)} generator threads on {cpus} CPUs: "
                        "threads share cores, so Mpps per thread drops")
    if s.rate and "nbgen" in s.engines and max(s.threads) * max(s.ports) > cpus:
        problems.append(f"{gen}: study.rate paces each nbgen thread on a CPU of its own: "
                        f"{max(s.threads) * max(s.ports)} threads need {max(s.threads) * max(s.ports)} CPUs, "
                        f"the host has {cpus}")
    if problems:
        raise problems_found(problems, "packets")
    return PacketContext(s, gen, rx, dict(transports), versions, exe, macs, online, kernel, devs, exes,
                         ), warnings


def _nbgen_on(t: Transport, local: str) -> str:
    """nbgen's path on a host: this build where the host sees it (the lab,
    and hosts sharing the path), else the one on the host's PATH."""
    r = t.run(["sh", "-c", 'if [ -x "$1" ]; then echo "$1"; else command -v nbgen || echo nbgen; fi', "nb", local],
              timeout=10)
    return r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "nbgen"


def _link_freebsd(t: Transport, dev: str) -> dict | None:
    """A FreeBSD interface as ``ip -j link`` would show what the study needs
    of it: its MAC and MTU (from ``ifconfig IF``)."""
    r = t.run(["ifconfig", dev], timeout=10)
    if r.returncode != 0:
        return None
    try:
        got = parse_ifconfig(r.stdout).get(dev)
    except NicbenchError:
        return None
    return None if got is None else {"address": got.ether or "", "mtu": got.mtu or 0}


def _online(t: Transport) -> list[int]:
    if host_os(t) == "FreeBSD":      # no /sys: hw.ncpu CPUs, numbered from 0
        r = t.run(["sysctl", "-n", "hw.ncpu"], timeout=10)
        n = r.stdout.strip()
        return list(range(int(n))) if r.returncode == 0 and n.isdigit() and int(n) > 0 else [0]
    try:
        cpus = cpu_set(t.read_text("/sys/devices/system/cpu/online").strip())
    except OSError:
        cpus = None
    return sorted(cpus) if cpus else [0]


def _frames(ctx: PacketContext, port: int, ip: int, size: int, threads: int) -> list[bytes]:
    src, dst = port_ips(port, ip)
    return fr.thread_frames(threads, src_mac=ctx.macs[(ctx.server, port)], dst_mac=ctx.macs[(ctx.receiver, port)],
                            src_ip=src, dst_ip=dst, size=size, dport=ctx.study.udp_port)


def generator_argv(engine: str, exe: str, dev: str, frames: list[bytes], *, duration: float, pin: list[int],
                   rate: float | None, frame_size: int, conf: str) -> tuple[list[str], str | None, list[int]]:
    """One port's generator: argv, trafgen's config text (None for nbgen) and
    the CPUs its threads run on.  ``rate`` is per port."""
    if engine == "nbgen":
        return (nbgen.tx_argv(exe, dev, frames, duration=duration, cpus=pin, rate=rate, interval=COUNT_INTERVAL),
                None, pin)
    if rate:
        # trafgen paces with one sender process, on CPU 0, whatever --cpus says:
        # frames bound to other CPUs would never leave
        return (trafgen.argv(dev, conf, duration=duration, cpus=1, rate=rate, frame_size=frame_size),
                fr.trafgen_config(frames), [0])
    return (trafgen.argv(dev, conf, duration=duration, cpus=max(pin) + 1, frame_size=frame_size),
            fr.trafgen_config(frames, pin), pin)


def _wait_attached(procs: list[tuple[int, Process]], name: Callable[[int], str] = port_ifname,
                   timeout: float = 10.0) -> dict[int, dict[str, Any]]:
    """Each receiver's "attached" line (mode, why), or a ToolError with nbgen's words."""
    by = time.monotonic() + timeout
    seen: dict[int, dict] = {}
    while len(seen) < len(procs):
        for port, p in procs:
            if port in seen:
                continue
            for line in read_output(p.stdout_path).splitlines():
                if '"attached"' in line:
                    try:
                        seen[port] = json.loads(line)
                    except ValueError:
                        break             # half written: read again on the next round
            if port not in seen and p.poll() is not None:
                err = nbgen.error_of(read_output(p.stderr_path)) or tail(tool_stderr(p.stderr_path)) or "no error text"
                raise ToolError(f"nbgen rx on {name(port)}: {err}", where=p.host)
        if len(seen) < len(procs):
            if time.monotonic() > by:
                raise ToolError(f"nbgen rx did not attach within {timeout:g}s", where=procs[0][1].host)
            time.sleep(0.01)
    return seen


def run_trial(ctx: PacketContext, env: PointEnv, spec: TrialSpec,
              raw_dir: Path) -> tuple[TrialRecord, list[Sample], list[RawOutput]]:
    """One point: a measurement at the study's rate (or as fast as the engine
    goes), or with ``search = "ndr"`` the no-drop-rate search."""
    if ctx.study.search == "ndr":
        return _ndr(ctx, env, spec, raw_dir)
    return _measure(ctx, env, spec, raw_dir, ctx.study.rate)


def _ndr(ctx: PacketContext, env: PointEnv, spec: TrialSpec,
         raw_dir: Path) -> tuple[TrialRecord, list[Sample], list[RawOutput]]:
    """The highest rate whose loss stays at or below ``loss_threshold``
    (RFC 2544's throughput; the search itself is :mod:`nicbench.run.ratesearch`).  The point
    keeps the samples of the best passing step; every step's rate and loss
    are in its meta.  A step's loss is worked out by the analysis' own pure
    function (a search needs its result to choose the next rate)."""
    s = ctx.study
    ports = int(spec.params["ports"])
    started = time.time()
    steps: list[ratesearch.Step] = []
    runs: list[tuple[TrialRecord, list[Sample]]] = []
    raws_all: list[RawOutput] = []
    rate: float | None = None
    while True:
        n = len(steps)
        rec, samples, raws = _measure(ctx, env, spec, raw_dir / f"step{n}", rate)
        raws_all += raws
        if rec.status != "ok":
            return rec, samples, raws_all     # a failed or interrupted step ends the point
        t = packet_trial(rec, samples, s.trim)
        if t.status != "ok" or not t.tx_pps or t.rx_pps is None:
            return TrialRecord(spec, "failed", started, time.time(), f"ndr step {n}: {t.error or 'nothing sent'}",
                               rec.meta), [], raws_all
        steps.append(ratesearch.judge(rate, t.tx_pps, t.rx_pps, t.loss, s.loss_threshold))
        runs.append((rec, samples))
        rate = ratesearch.next_rate(steps, units=ports, max_steps=s.search_steps)
        if rate is None:
            break
    search: dict[str, Any] = {"loss_threshold": s.loss_threshold,
                              "steps": [_step_dict(i, x) for i, x in enumerate(steps)]}
    k = ratesearch.best(steps)
    if k is None:
        tried = [x.rate for x in steps if x.rate]
        lowest = f"lowest tried {min(tried):.0f} frames/s per port" if tried else "only the unpaced step ran"
        why = f"no rate tried had loss <= {s.loss_threshold:.3%} ({lowest})"
        return TrialRecord(spec, "failed", started, time.time(), why, {"ndr": search}), [], raws_all
    rec, samples = runs[k]
    search["rate_per_port"] = steps[k].rate  # None: unpaced, the generator's own maximum
    return TrialRecord(spec, "ok", started, time.time(), None, {**rec.meta, "ndr": search}), samples, raws_all


def _step_dict(i: int, s: ratesearch.Step) -> dict[str, object]:
    """A step as the run stores it (rates per port in frames/s, all ports' pps)."""
    return {"step": i, "rate_per_port": s.rate, "tx_pps": s.sent, "rx_pps": s.received, "loss": s.loss,
            "passed": s.passed}


def _measure(
    ctx: PacketContext, env: PointEnv, spec: TrialSpec, raw_dir: Path, rate: float | None
) -> tuple[TrialRecord, list[Sample], list[RawOutput]]:
    s = ctx.study
    p = spec.params
    engine, ip, ports, threads, size = (
        str(p["engine"]),
        int(p["ip"]),
        int(p["ports"]),
        int(p["threads"]),
        int(p["frame_size"]),
    )
    gen_t, rx_t = ctx.transports[ctx.server], ctx.transports[ctx.receiver]
    started = time.time()
    raw_dir.mkdir(parents=True, exist_ok=True)
    meta: dict = {
        "engine": engine,
        "generator": ctx.server,
        "receiver": ctx.receiver,
        "argv": {},
        "ports": [],
        "rate_per_port": rate,
    }
    raws: list[RawOutput] = []
    rxs: list[tuple[int, Process]] = []
    txs: list[tuple[int, Process]] = []
    guard = PointGuard(meta, lambda: [p for _, p in txs + rxs], grace=1.0)
    remote_confs: list[str] = []
    samples: list[Sample] = []
    cpus = ctx.cpus
    with guard:
        if engine == "pkt-gen":
            rxs += _pktgen_receivers(ctx, spec, raw_dir, env, threads, meta, raws)
        for i in range(ports if engine != "pkt-gen" else 0):
            dev = ctx.dev(ctx.receiver, i)
            out, err = raw_dir / f"rx-{dev}.out", raw_dir / f"rx-{dev}.err"
            argv = nbgen.rx_argv(
                ctx.exes[ctx.receiver], dev, duration=s.duration + s.timeout_margin, port=s.udp_port, mode=s.xdp_mode,
                interval=COUNT_INTERVAL,
            )
            raws += [
                RawOutput(spec.trial_id, ctx.receiver, "receiver", "nbgen", "stdout", env.rel(out)),
                RawOutput(spec.trial_id, ctx.receiver, "receiver", "nbgen", "stderr", env.rel(err)),
            ]
            rxs.append((i, rx_t.spawn(argv, stdout=out, stderr=err)))
            meta["argv"][f"rx {dev}"] = argv
        attached = _wait_attached(rxs, lambda i: ctx.dev(ctx.receiver, i)) if engine != "pkt-gen" else {}
        meta["xdp"] = {
            ctx.dev(ctx.receiver, i): {"mode": a.get("mode"), "why": a.get("why") or None} for i, a in attached.items()
        }
        generic = [
            f"{ctx.dev(ctx.receiver, i)}: {a.get('why')}" for i, a in attached.items() if a.get("mode") == "generic"
        ]
        if generic and s.xdp_mode == "auto":
            meta.setdefault("warnings", []).append(
                "receiver XDP runs in generic mode (slower, after the skb is built): " + "; ".join(generic)
            )
        for i in range(ports):
            dev = ctx.dev(ctx.server, i)
            frames = _frames(ctx, i, ip, size, threads)
            out, err = raw_dir / f"tx-{dev}.out", raw_dir / f"tx-{dev}.err"
            # every generator thread of the point on a CPU of its own while CPUs last
            pin = [cpus[(i * threads + k) % len(cpus)] for k in range(threads)]
            if engine == "pkt-gen":
                argv, conf_text = _pktgen_tx_argv(ctx, i, dev, ip, size, threads, rate, pin), None
            # trafgen's config is made first, then written where the generator reads it
            else:
                argv, conf_text, pin = generator_argv(
                    engine,
                    ctx.exes[ctx.server] if engine == "nbgen" else "",
                    dev,
                    frames,
                    duration=s.duration,
                    pin=pin,
                    rate=rate,
                    frame_size=size,
                    conf="{conf}",
                )
            if conf_text is not None:
                where = gen_t.put_file(raw_dir / f"trafgen-{dev}.cfg", conf_text)
                remote_confs.append(where)
                argv = [where if a == "{conf}" else a for a in argv]
            meta.setdefault("pinning", {})[dev] = pin
            raws += [
                RawOutput(spec.trial_id, ctx.server, "generator", engine, "stdout", env.rel(out)),
                RawOutput(spec.trial_id, ctx.server, "generator", engine, "stderr", env.rel(err)),
            ]
            txs.append((i, gen_t.spawn(argv, stdout=out, stderr=err, gated=True)))
            meta["argv"][f"tx {dev}"] = argv
            # pkt-gen builds its own frames (its -s/-d/-S/-D in argv): only nicbench's are recorded byte for byte
            meta["ports"].append({"port": dev, "threads": threads}
                                 | ({"frame_hex": frames[0].hex()} if engine != "pkt-gen" else {}))
        samplers = guard.samplers = PointSamplers(
            spec.trial_id,
            _net_targets(ctx, rxs, txs, ports),
            env.cpu_transport,
            _tool_procs(ctx, env, rxs, txs, engine),
            machine=env.cpu_machine,
            nic_irqs=env.nic_irqs,
            net_interval=0.25,
        ).start(first_read=True)
        meta["released"] = release_together([pr for _, pr in txs], engine, ctx.server)
        # the hosts' own counters (sampled on the host) read at the window's edges
        samplers.read_at([meta["released"] + s.trim, meta["released"] + s.duration - s.trim])
        # pkt-gen first waits for the link it reset on entering netmap mode
        runs_for = s.duration + s.timeout_margin + (PKTGEN_WAIT_S if engine == "pkt-gen" else 0)
        end_by = time.monotonic() + runs_for
        for i, pr in txs:
            if pr.wait(end_by - time.monotonic()) is None:
                raise ToolError(
                    f"{engine} on {ctx.dev(ctx.server, i)} still running after {runs_for:g}s",
                    where=ctx.server,
                    hint="raise study.timeout_margin if the host is only slow",
                )
        time.sleep(DRAIN_S)
        samplers.last_read()
        for _, pr in rxs:
            # nbgen prints its last counts, then detaches; pkt-gen ends its threads on SIGINT
            pr.stop(2.0, signal.SIGINT if engine == "pkt-gen" else signal.SIGTERM)
    status, error, counters = guard.status, guard.error, guard.counters
    gen_t.drop_files(remote_confs)
    if status == "ok":
        try:
            samples += _results(ctx, spec, engine, txs, rxs, meta)
        except NicbenchError as e:
            status, error = "failed", e.one_line().removeprefix("nicbench: ")
    samples += counters
    ended = time.time()
    meta["overhead_s"] = (ended - started) - s.duration
    return TrialRecord(spec, status, started, ended, error, meta), samples, raws  # type: ignore[arg-type]


Ports = Sequence[tuple[int, Process]]


def _results(
    ctx: PacketContext, spec: TrialSpec, engine: str, txs: Ports, rxs: Ports, meta: dict[str, Any]
) -> list[Sample]:
    out: list[Sample] = []
    meta["tx"], meta["rx"] = {}, {}
    for i, pr in txs:
        dev = ctx.dev(ctx.server, i)
        o, e = read_output(pr.stdout_path), read_output(pr.stderr_path)
        rc = pr.poll()
        t0, t1 = gate_time(pr), gate_time(pr, END_MARK)
        off = host_clock_offset(pr)             # nbgen stamps with its host's clock
        tags = make_tags(host=ctx.server, port=dev, side="sender", engine=engine)
        if engine == "pkt-gen":
            out += _pktgen_counts(spec, pr, o, e, dev, tags, "pkt.sent", ctx.server, meta["tx"], rc, meta["released"])
        elif engine == "nbgen":
            tx = nbgen.parse_tx(o, e, where=ctx.server)
            meta["tx"][dev] = {
                "sent": tx.sent,
                "paced_out": tx.paced_out,
                "per_cpu": list(tx.per_cpu),
                "threads": list(tx.threads),
                "span": [tx.t_start - off, tx.t_end - off],
            }
            for (a, na), (b, nb) in pairwise(tx.reads):
                if b > a:
                    out.append(Sample(spec.trial_id, "pkt.sent", float(nb - na), "packets", a - off, b - off, tags))
        else:
            # timeout's 124 is the duration ending it; anything else is trafgen's own failure
            if rc not in (0, 124, 130, -2):
                raise ToolError(f"trafgen on {dev} exited {rc}: {tail(e) or tail(o)}", where=ctx.server,
                                hint=trafgen.failure_hint(e))
            sm = trafgen.parse(o)
            if sm is None:
                raise ToolError(f"trafgen on {dev} printed no summary: {tail(e) or tail(o)}", where=ctx.server,
                                hint=trafgen.failure_hint(e))
            if t0 is None or t1 is None:
                raise ToolError(f"trafgen on {dev}: the start gate recorded no time", where=ctx.server)
            meta["tx"][dev] = {"sent": sm.packets, "bytes": sm.bytes, "per_cpu": sm.per_cpu, "span": [t0, t1]}
            # one span for the whole run: the rate comes from the interface counters
            out.append(Sample(spec.trial_id, "pkt.sent", float(sm.packets), "packets", t0, t1, tags))
    for i, pr in rxs:
        dev = ctx.dev(ctx.receiver, i)
        if engine == "pkt-gen":
            tags = make_tags(host=ctx.receiver, port=dev, side="receiver", engine=engine)
            out += _pktgen_counts(spec, pr, read_output(pr.stdout_path), read_output(pr.stderr_path), dev, tags,
                                  "pkt.received", ctx.receiver, meta["rx"], pr.poll(), meta["released"])
            continue
        rx = nbgen.parse_rx(read_output(pr.stdout_path), read_output(pr.stderr_path), where=ctx.receiver)
        if not rx.ended:
            raise ToolError(f"nbgen rx on {dev} was killed before its last count", where=ctx.receiver)
        meta["rx"][dev] = {
            "packets": rx.packets,
            "bytes": rx.bytes,
            "other": rx.other,
            "per_cpu": list(rx.per_cpu),
            "mode": rx.mode,
        }
        tags = make_tags(host=ctx.receiver, port=dev, side="receiver", engine=engine)
        off = host_clock_offset(pr)
        for (a, na, ba), (b, nb, bb) in pairwise(rx.reads):
            if b > a:
                out.append(Sample(spec.trial_id, "pkt.received", float(nb - na), "packets", a - off, b - off, tags))
                out.append(Sample(spec.trial_id, "pkt.received_bytes", float(bb - ba), "bytes", a - off, b - off,
                                  tags))
        if rx.packets == 0:
            raise ToolError(
                f"the receiver counted no test frame on {dev} (sent: {meta['tx'].get(dev, {}).get('sent', '?')})",
                where=ctx.receiver,
                hint="does the generator's driver transmit XDP frames (ndo_xdp_xmit)? "
                'engines = ["trafgen"] does not need it',
            )
    return out


def _net_targets(ctx: PacketContext, rxs: Ports, txs: Ports, ports: int) -> list[NetTarget]:
    gen_pids = lambda: [pr.pid for _, pr in txs]  # noqa: E731 - the shims live in the generator's namespace
    rx_pids = lambda: [pr.pid for _, pr in rxs]  # noqa: E731
    out = []
    for i in range(ports):
        out.append(NetTarget(ctx.server, ctx.transports[ctx.server], gen_pids, ctx.dev(ctx.server, i)))
        out.append(NetTarget(ctx.receiver, ctx.transports[ctx.receiver], rx_pids, ctx.dev(ctx.receiver, i)))
    return out


def _tool_procs(
    ctx: PacketContext, env: PointEnv, rxs: Ports, txs: Ports, engine: str
) -> Callable[[], list[tuple[int, str, str, str]]]:
    """The receivers by PID, each generator below its gate shim and, for
    trafgen, the per-CPU senders it forks (its parent only waits)."""
    if env.cpu_transport is None:
        return lambda: []
    t = env.cpu_transport
    fixed = [(pr.pid, ctx.receiver, "nbgen-rx", ctx.dev(ctx.receiver, i)) for i, pr in rxs]
    base = tool_procs(t, lambda: fixed, [(pr.pid, ctx.server, engine, ctx.dev(ctx.server, i)) for i, pr in txs])

    def procs() -> list[tuple[int, str, str, str]]:
        out = base()
        if engine == "trafgen":
            out += [
                (kid, host, role, f"{proc} sender {n}")
                for pid, host, role, proc in list(out)
                if role == "trafgen"
                for n, kid in enumerate(child_pids(t, pid))
            ]
        return out

    return procs


def _pktgen_tx_argv(ctx: PacketContext, i: int, dev: str, ip: int, size: int, threads: int, rate: float | None,
                    pin: list[int]) -> list[str]:
    """Port ``i``'s pkt-gen generator, its threads on the point's CPUs from
    ``pin[0]`` on (pkt-gen pins thread k to CPU first + k modulo -c)."""
    src, dst = port_ips(i, ip)           # the frames' addresses, as nbgen's and trafgen's (_frames)
    argv = pktgen.tx_argv(dev, frame_size=size, ip=ip, src_ip=src, dst_ip=dst,
                          src_mac=ctx.macs[(ctx.server, i)], dst_mac=ctx.macs[(ctx.receiver, i)], sport=1024,
                          dport=ctx.study.udp_port, threads=threads, duration=ctx.study.duration,
                          wait=PKTGEN_WAIT_S, rate=rate, first_cpu=pin[0], cpus=len(ctx.cpus))
    return argv


def _pktgen_receivers(ctx: PacketContext, spec: TrialSpec, raw_dir: Path, env: PointEnv, threads: int,
                      meta: dict, raws: list[RawOutput]) -> list[tuple[int, Process]]:
    """pkt-gen rx on every receiver port, each waited for until it says
    "Ready..." (netmap mode entered, the link wait over), or a ToolError with
    pkt-gen's own last line."""
    t = ctx.transports[ctx.receiver]
    ports = int(spec.params["ports"])
    procs: list[tuple[int, Process]] = []
    for i in range(ports):
        dev = ctx.dev(ctx.receiver, i)
        out, err = raw_dir / f"rx-{dev}.out", raw_dir / f"rx-{dev}.err"
        argv = pktgen.rx_argv(dev, threads=threads, wait=PKTGEN_WAIT_S)
        raws += [RawOutput(spec.trial_id, ctx.receiver, "receiver", "pkt-gen", "stdout", env.rel(out)),
                 RawOutput(spec.trial_id, ctx.receiver, "receiver", "pkt-gen", "stderr", env.rel(err))]
        procs.append((i, t.spawn(argv, stdout=out, stderr=err)))
        meta["argv"][f"rx {dev}"] = argv
    by = time.monotonic() + PKTGEN_WAIT_S + 10
    waiting = dict(procs)
    while waiting:
        for i, p in list(waiting.items()):
            if pktgen.ready(read_output(p.stderr_path)):
                del waiting[i]
            elif p.poll() is not None:
                text = read_output(p.stdout_path) + read_output(p.stderr_path)
                raise ToolError(f"pkt-gen rx on {ctx.dev(ctx.receiver, i)} exited: {tail(text) or 'no output'}",
                                where=ctx.receiver, hint=PKTGEN_INSTALL)
        if waiting:
            if time.monotonic() > by:
                raise ToolError(f"pkt-gen rx was not ready within {PKTGEN_WAIT_S + 10}s", where=ctx.receiver)
            time.sleep(0.02)
    return procs


def _pktgen_counts(spec: TrialSpec, pr: Process, out: str, err: str, dev: str, tags: Any, metric: str, host: str,
                   into: dict[str, Any], rc: int | None, released: float) -> list[Sample]:
    """One pkt-gen's counts per report interval as samples on this machine's
    clock (its stamps are its host's seconds modulo 1000, put back near the
    point's start); its total, span and exit into the trial's meta."""
    # timeout's 124 is the duration ending it; SIGINT (130, or -2 seen from here) is how both ends stop
    if rc not in (0, 124, 130, -2, None):
        raise ToolError(f"pkt-gen on {dev} exited {rc}: {tail(err) or tail(out)}", where=host)
    off = host_clock_offset(pr)
    near = float(released) + off             # the barrier's release, on the host's clock
    run = pktgen.parse_run(out, err, near=near, where=f"{host}: pkt-gen on {dev}")
    if run.packets == 0 and metric == "pkt.received":
        raise ToolError(f"pkt-gen rx counted no frame on {dev}", where=host,
                        hint="do the MACs match (pkt-gen -D is the receiver port's), and is the link up?")
    into[dev] = {"sent" if metric == "pkt.sent" else "packets": run.packets, "mode": "netmap",
                 "span": [run.intervals[0].t_start - off, run.intervals[-1].t_end - off]}
    return [Sample(spec.trial_id, metric, float(iv.packets), "packets", iv.t_start - off, iv.t_end - off, tags)
            for iv in run.intervals if iv.t_end > iv.t_start]

