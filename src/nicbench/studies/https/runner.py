"""The HTTPS study (seed 001): nginx on the server, wrk on every client.

nginx is started once for the study -- a generated configuration, a
self-signed certificate and a payload file in a private prefix on the server
host, in the foreground under nicbench, with its own pid and logs -- checked
with ``nginx -t`` first, and stopped after the last point.  Each point starts
one wrk per client behind the same start barrier as the TCP study, samples
CPU and counters on every host, and reads the kernel's TLS counters before
and after, so the report says whether kTLS was used from evidence.  The
point's sequence (raw files, pinned spawns, guard, samplers, wrk awaited
with a limit -- one wrk still running fails the point --, the record and
its overhead) is :class:`nicbench.run.point.Point`'s; this module says only
what is wrk's and nginx's.

Measured per point: application bytes (wrk: bodies and headers it read) over
each wrk's run, wire bytes from the server's counters over the same span,
CPU of the machine and of nginx's workers and wrk.
"""

from __future__ import annotations

import resource
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...core.errors import NicbenchError, PreflightError, ToolError, tail
from ...hosts.base import Hosts
from ...hosts.transport import Process, Transport, gate_time, host_os, read_output
from ...plan.model import Plan
from ...plan.studies.https import HttpsStudy
from ...records import RawOutput, Sample, TrialSpec, make_tags
from ...run.kit import PointEnv, PointSamplers, even_shares, release_together, stall_causes, stalled
from ...run.point import Point
from ...run.preflight import NOFILE_HINT, busy_ports, nofile_limit, problems_found, reach_problems, tool_version
from ...run.sockstat import tcp_listening_of
from ...run.study import Preflight, TrialOutcome
from ...sampling.sampler import NetTarget, child_pids, tool_procs
from ...tools import ktls, nginx, wrk
from ...tools.base import parse_version
from . import freebsd

PAYLOAD = "payload.bin"


@dataclass
class HttpsContext:
    """The HTTPS study's state: what preflight decided, and nginx while it runs."""

    study: HttpsStudy
    server: str
    clients: list[str]
    transports: dict[str, Transport]
    addresses: dict[str, str]
    versions: dict[str, str]
    ktls_kernel: bool
    prefix: str | None = None
    nginx: Process | None = None
    log_offset: int = 0
    ktls_why: str = ""
    raws: list[RawOutput] = field(default_factory=list)   # nginx's own outputs, stored when it stops
    lua: dict[str, str] = field(default_factory=dict)     # client -> wrk.lua's path on that host


class HttpsRunner:
    """The HTTPS study as the session drives it (see ``run.study.StudyRunner``)."""

    kind = "https"

    def __init__(self, plan: Plan, hosts: Hosts):
        self.plan = plan
        self.transports = hosts.transports()
        self.addresses = {h.name: h.ip for h in hosts.spec.hosts}
        self.ctx: HttpsContext | None = None

    def preflight(self) -> Preflight:
        self.ctx, warnings = preflight(self.plan, self.transports, self.addresses)
        s, v = self.ctx.study, self.ctx.versions
        return Preflight(
            tools=("nginx", "wrk", "openssl", "ethtool"), warnings=tuple(warnings),
            meta={"engine": "nginx + wrk",
                  "engine_version": f"nginx {v.get('nginx')}, wrk {v.get('wrk')}, OpenSSL {v.get('openssl')}",
                  "versions": v, "ktls_requested": s.ktls, "ktls_kernel": self.ctx.ktls_kernel,
                  "ktls_kernel_evidence": self.ctx.ktls_why, "tls_versions": s.tls_versions,
                  "file_size": s.file_size, "trim": 0.0})

    def start(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        assert self.ctx is not None, "preflight first"
        return start(self.ctx, env, raw_dir)

    def trial(self, env: PointEnv, spec: TrialSpec, raw_dir: Path) -> TrialOutcome:
        assert self.ctx is not None, "preflight first"
        return run_trial(self.ctx, env, spec, raw_dir)

    def stop(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        return stop(self.ctx, env, raw_dir) if self.ctx is not None else []


def preflight(plan: Plan, transports: dict[str, Transport],
              addresses: dict[str, str]) -> tuple[HttpsContext, list[str]]:
    s = plan.study
    assert isinstance(s, HttpsStudy)
    problems, warnings = [], []
    versions: dict[str, str] = {}
    srv = transports[plan.server]
    install = "apt-get install nginx-light wrk openssl (the set-up command in README.md does it)"
    for name, argv in (("nginx", ["nginx", "-v"]), ("openssl", ["openssl", "version"])):
        try:
            versions[name] = tool_version(srv, argv, name, install)
        except PreflightError as e:
            problems.append(f"{plan.server}: {e.message}")
    if s.ktls and "https" in s.schemes and "nginx" in versions:
        problems += [p for p in [nginx.MIN_KTLS.problem(parse_version(versions["nginx"]), plan.server)] if p]
    for c in plan.clients:
        try:
            versions["wrk"] = tool_version(transports[c], ["wrk", "-v"], "wrk", install)
            problems += [p for p in [wrk.MIN_VERSION.problem(parse_version(versions["wrk"]), c)] if p]
        except PreflightError as e:
            problems.append(f"{c}: {e.message}")
    problems += reach_problems(srv, {c: addresses[c] for c in plan.clients})
    busy = busy_ports(srv)
    for port in (s.https_port, s.http_port):
        if port in busy:
            problems.append(f"{plan.server}: port {port} already in use")
    if problems:
        raise problems_found(problems, "https")
    if host_os(srv) == "FreeBSD":
        has_tls, why = freebsd.kernel_tls(srv)
    else:
        has_tls, why = kernel_tls(srv, load=s.ktls and "https" in s.schemes)
    if s.ktls and "https" in s.schemes and not has_tls:
        warnings.append(f"kTLS asked for, but this kernel has no TLS ({why}): OpenSSL falls back to userspace "
                        "TLS, and the report says so")
    _raise_nofile(max(s.connections))
    problems = _nofile_problems(s, plan.server, list(plan.clients), transports)
    if problems:
        raise PreflightError("; ".join(problems),
                             hint=f"{NOFILE_HINT}, or use fewer connections")
    return HttpsContext(s, plan.server, list(plan.clients), dict(transports), addresses, versions, has_tls,
                        ktls_why=why), warnings


def kernel_tls(t: Transport, load: bool) -> tuple[bool, str]:
    """Does the kernel offer TLS to sockets?  Evidence: /proc/net/tls_stat and
    ``tls`` in tcp_available_ulp.  An unloaded module is loaded (as root), since
    nginx's workers, running as nobody, cannot trigger its autoload."""
    def have() -> bool:
        try:
            t.read_text("/proc/net/tls_stat")
            return True
        except OSError:
            return False
    if have():
        return True, "/proc/net/tls_stat is present"
    if load:
        try:
            t.run(["modprobe", "tls"], timeout=15)
        except PreflightError:
            pass                                   # no modprobe: the evidence below decides
        if have():
            return True, "module tls loaded by nicbench"
    try:
        ulps = t.read_text("/proc/sys/net/ipv4/tcp_available_ulp").split()
    except OSError:
        ulps = []
    return False, f"tcp_available_ulp lists {' '.join(ulps) or 'nothing'}, /proc/net/tls_stat is absent"


def _raise_nofile(connections: int) -> None:
    """wrk needs a descriptor per connection and inherits our limit: raise the
    soft limit to the hard one (often 1024 -> 524288)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < connections + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


WRK_FDS = 64          # wrk's own descriptors besides one per connection (threads' epoll, stdio, the script)


def _nofile_problems(s: HttpsStudy, server: str, clients: list[str], transports: dict[str, Transport]) -> list[str]:
    """Open-files limits too low for the sweep's largest point, caught before
    it runs rather than as wrk's socket errors or nginx's 'Too many open
    files' mid-point: wrk needs a descriptor per connection, nginx two (the
    connection and the file it sends)."""
    out = []
    most = max(s.connections)
    per_client = -(-most // max(1, len(clients)))
    for c in clients:
        have = nofile_limit(transports[c], "-n")
        if have is not None and have < per_client + WRK_FDS:
            out.append(f"{c}: open-files limit is {have}, wrk needs {per_client + WRK_FDS} for {per_client} "
                       "connections")
    have = nofile_limit(transports[server], "-Hn")
    if have is not None and have < 2 * most + WRK_FDS:
        out.append(f"{server}: open-files limit is {have}, nginx needs {2 * most + WRK_FDS} for {most} connections "
                   "(a socket and a file each)")
    return out


def _sh(t: Transport, script: str, *args: str, input: str | None = None, what: str, timeout: float = 60) -> str:
    """A shell step on the server host (arguments passed as $1.., never spliced in)."""
    return t.run(["sh", "-c", script, "nicbench", *args], input=input, timeout=timeout).check(what).stdout


def start(ctx: HttpsContext, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
    """nginx up on the server host, or a ToolError with nginx's own line."""
    s = ctx.study
    t = ctx.transports[ctx.server]
    ctx.prefix = _sh(t, "mktemp -d /tmp/nicbench-nginx.XXXXXX", what="making nginx's prefix").strip()
    p = ctx.prefix
    conf = nginx.render(nginx.NginxConf(p, ctx.addresses[ctx.server], s.https_port, s.http_port,
                                        workers=str(s.workers), tls_versions=tuple(s.tls_versions),
                                        ciphers=s.ciphers, ciphersuites=s.ciphersuites, ktls=s.ktls))
    # workers run as nobody: the prefix and the docroot must be readable by them
    _sh(t, 'mkdir -p "$1/logs" "$1/tmp" "$1/www" && chmod 755 "$1" "$1/www" && cat > "$1/nginx.conf"', p,
        input=conf, what="writing nginx.conf")
    _sh(t, 'openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 '
           '-subj /CN=nicbench -keyout "$1/key.pem" -out "$1/cert.pem"', p, what="making the certificate")
    _sh(t, 'head -c "$2" /dev/urandom > "$1/www/$3" && chmod 644 "$1/www/$3"', p, str(s.file_size), PAYLOAD,
        what=f"writing the {s.file_size}-byte payload", timeout=600)
    raw_dir.mkdir(parents=True, exist_ok=True)
    (raw_dir / "nginx.conf").write_text(conf)
    r = t.run(nginx.test_argv(p), timeout=30)
    if r.returncode != 0:
        raise ToolError(f"nginx -t: {nginx.first_error(r.stderr) or tail(r.stderr)}", where=ctx.server,
                        hint="the generated configuration is in the run's raw/https/nginx.conf")
    script = wrk.lua_text()
    for c in ctx.clients:
        ctx.lua[c] = ctx.transports[c].put_file(raw_dir / f"wrk-{c}.lua", script)
    out, err = raw_dir / "nginx.out", raw_dir / "nginx.err"
    ctx.raws += [RawOutput("nginx", ctx.server, "server", "nginx", "stdout", env.rel(out)),
                 RawOutput("nginx", ctx.server, "server", "nginx", "stderr", env.rel(err))]
    ctx.nginx = t.spawn(env.pinned(ctx.server, nginx.argv(p)), stdout=out, stderr=err)
    deadline = time.monotonic() + 10
    while True:
        rc = ctx.nginx.poll()
        if rc is not None:
            text = read_output(err) + "\n" + _log(t, p)
            msg = nginx.first_error(text) or tail(text) or f"exited {rc}"
            hint = ("another process holds the port: pick study.https_port/http_port or stop it"
                    if "in use" in msg else None)
            raise ToolError(f"nginx failed to start: {msg}", where=ctx.server, hint=hint)
        ports = tcp_listening_of(t, ctx.nginx.pid)
        if {s.https_port, s.http_port} <= ports:
            break
        if time.monotonic() > deadline:
            raise ToolError("nginx is not listening after 10 s", where=ctx.server)
        time.sleep(0.02)
    return []          # its outputs are recorded by stop(), which also runs after a failed start


def stop(ctx: HttpsContext, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
    """Stop nginx, keep its outputs and error log with the run, remove its prefix."""
    raws, ctx.raws = list(ctx.raws), []
    t = ctx.transports[ctx.server]
    for c, path in ctx.lua.items():
        ctx.transports[c].drop_files([path])
    ctx.lua = {}
    if ctx.nginx is not None:
        # always: workers outlive a dead master, and stop() kills what is left of the group
        ctx.nginx.stop(grace=5.0, sig=signal.SIGQUIT)        # graceful: workers finish, then exit
    if ctx.prefix:
        prefix, ctx.prefix = ctx.prefix, None
        try:
            log = _log(t, prefix)
            if log:
                raw_dir.mkdir(parents=True, exist_ok=True)
                (raw_dir / "error.log").write_text(log)
                raws.append(RawOutput("nginx", ctx.server, "server", "nginx", "stderr",
                                      env.rel(raw_dir / "error.log")))
        finally:
            if prefix.startswith("/tmp/nicbench-nginx."):
                r = t.run(["rm", "-rf", "--one-file-system", prefix], timeout=60)
                if r.returncode != 0:
                    raise ToolError(f"could not remove nginx's prefix {prefix}: {tail(r.stderr)}", where=ctx.server)
    return raws


def _log(t: Transport, prefix: str) -> str:
    try:
        return t.read_text(f"{prefix}/logs/error.log")
    except OSError:
        return ""


def shares(connections: int, clients: list[str]) -> list[tuple[str, int]]:
    return list(zip(clients, even_shares(connections, len(clients)), strict=True))


def _tls_stat(ctx: HttpsContext) -> dict[str, int] | None:
    """The server namespace's TLS counters (through the namespace, so a dead nginx cannot hide them)."""
    if not ctx.ktls_kernel:
        return None
    try:
        return ktls.parse_tls_stat(ctx.transports[ctx.server].read_text("/proc/net/tls_stat"))
    except OSError:
        return None


def run_trial(ctx: HttpsContext, env: PointEnv, spec: TrialSpec, raw_dir: Path) -> TrialOutcome:
    s = ctx.study
    scheme, conns = str(spec.params["scheme"]), int(spec.params["connections"])
    threads = int(spec.params.get("threads") or 1)
    port = s.https_port if scheme == "https" else s.http_port
    url = f"{scheme}://{ctx.addresses[ctx.server]}:{port}/{PAYLOAD}"
    pt = Point(spec, env, raw_dir, "wrk", {"url": url, "engine": "wrk", "server": ctx.server, "argv": {},
                                           "layout": [], "error_budget": s.error_budget}, nominal_s=s.duration)
    meta = pt.meta
    procs: list[tuple[str, Process]] = []
    samples: list[Sample] = []
    bsd = freebsd.TlsDuringPoint(ctx.transports[ctx.server]) if host_os(ctx.transports[ctx.server]) == "FreeBSD" \
        else None
    before = _tls_stat(ctx) if bsd is None else None
    with pt:
        if ctx.nginx is None or ctx.nginx.poll() is not None:
            raise ToolError("nginx is not running", where=ctx.server,
                            hint="its error log is in the run's raw/https/")
        for client, n in shares(conns, ctx.clients):
            argv = wrk.client_argv(url, script=ctx.lua[client], threads=min(threads, n), connections=n,
                                   duration=s.duration, timeout=s.duration + 5)
            procs.append((client, pt.spawn(ctx.transports[client], client, "client", f"{client}-wrk", argv,
                                           key=client, gated=True)))
            meta["layout"].append({"client": client, "connections": n, "threads": min(threads, n)})
        # samplers first: the window starts at the first wrk's start, so their
        # first read must come before it
        samplers = pt.sample(PointSamplers(spec.trial_id, _net_targets(ctx, env, procs), env.cpu_transport,
                                           _tool_procs(ctx, env, procs), machine=env.cpu_machine,
                                           nic_irqs=env.nic_irqs), first_read=True)
        meta["released"] = release_together([p for _, p in procs], "wrk", "clients")
        if bsd is not None:       # FreeBSD's session gauges: read while the sessions are open
            bsd.read_in(meta["released"] - time.time() + s.duration / 2)
        limit = s.duration + s.timeout_margin

        def hung_wrk(client: str, p: Process) -> ToolError:
            hosts = {h: ctx.transports[h] for h in (ctx.server, client)}
            return stalled(f"wrk on {client}", limit, client, stall_causes(hosts, env.ifnames, [p]),
                           "the server stopped answering; raise study.timeout_margin if the host is only slow")
        # one wrk short fails the point: the server's bytes are everyone's
        pt.await_clients(procs, limit, str, hung_wrk, lose=False)
        samplers.last_read()
    status, error = pt.status, pt.error
    if bsd is None:
        after = _tls_stat(ctx)
        meta["tls_stat"] = {"before": before, "after": after}
        meta["ktls"] = ktls.verdict(scheme, before, after, kernel_has_tls=ctx.ktls_kernel, why=ctx.ktls_why)
    else:
        ev = bsd.evidence()
        meta["tls_sysctl"] = {"before": bsd.before, "during": bsd.during, "mode": ev.mode}
        meta["ktls"] = freebsd.verdict(scheme, ev, kernel_has_tls=ctx.ktls_kernel, why=ctx.ktls_why)
    results: dict[str, dict] = {}
    if status == "ok":
        try:
            _read_wrks(procs, spec.trial_id, scheme, s.file_size, samples, results)
        except NicbenchError as e:
            status, error = "failed", e.one_line().removeprefix("nicbench: ")
    meta["wrk"] = results
    bad = {c: r["errors"] for c, r in results.items() if any(r["errors"].values())}
    if bad:
        meta.setdefault("warnings", []).append(
            "wrk counted errors (their bytes are in its total): "
            + "; ".join(f"{c}: " + ", ".join(f"{k} {v}" for k, v in e.items() if v) for c, e in bad.items())
        )
    log = _log(ctx.transports[ctx.server], ctx.prefix) if ctx.prefix else ""
    limits = [ln.message for ln in nginx.parse_error_log(log[ctx.log_offset :]) if ln.is_limit]
    ctx.log_offset = len(log)
    if limits:
        meta.setdefault("warnings", []).append(f"nginx hit a limit: {limits[0]} ({len(limits)} lines)")
    return pt.outcome(status, error, samples)


Procs = Sequence[tuple[str, Process]]


def _read_wrks(procs: Procs, trial_id: str, scheme: str, file_size: int, samples: list[Sample],
               results: dict[str, dict]) -> None:
    """Each wrk's bytes, requests and errors over its own run (from its gate
    stamp) into ``samples``, its figures into ``results``; a ToolError when a
    wrk's bytes are not the payload's (error responses) or it completed no
    request (what the wrks before it said is kept)."""
    for client, p in procs:
        res = wrk.parse(read_output(p.stdout_path), read_output(p.stderr_path))
        t0 = gate_time(p)
        if t0 is None:
            raise ToolError("the start gate recorded no time", where=client)
        tags = make_tags(host=client, scheme=scheme, side="receiver", direction="tx")
        t1 = t0 + res.duration_s
        samples += [Sample(trial_id, "http.bytes", float(res.bytes), "bytes", t0, t1, tags),
                    Sample(trial_id, "http.requests", float(res.requests), "count", t0, t1, tags),
                    Sample(trial_id, "http.socket_errors", float(res.socket_errors), "count", t0, t1, tags),
                    Sample(trial_id, "http.bad_status", float(res.bad_status), "count", t0, t1, tags)]
        results[client] = {"gbps": res.gbps, "requests": res.requests, "errors": res.errors,
                           "latency_us": res.latency_us, "percentiles_us": res.percentiles_us}
        if res.bad_status:
            raise ToolError(f"wrk on {client}: {res.bad_status} of {res.requests} responses were not "
                            "2xx/3xx, so its bytes are not the payload", where=client,
                            hint="the server's error log is in the run's raw/https/error.log")
        if res.requests == 0:
            raise ToolError(f"wrk on {client} completed no request in {res.duration_s:.1f}s (file of {file_size} "
                            "bytes)", where=client, hint="a smaller study.file_size or a longer duration")


def _net_targets(ctx: HttpsContext, env: PointEnv, procs: Procs) -> list[NetTarget]:
    nginx_pid = ctx.nginx.pid if ctx.nginx is not None else None
    out = [
        NetTarget(
            ctx.server, ctx.transports[ctx.server], lambda: [nginx_pid] if nginx_pid else [], env.if_of(ctx.server)
        )
    ]
    for client, p in procs:
        out.append(NetTarget(client, ctx.transports[client], _pid_of(p), env.if_of(client)))
    return out


def _tool_procs(ctx: HttpsContext, env: PointEnv, procs: Procs) -> Callable[[], list[tuple[int, str, str, str]]]:
    """nginx's master and workers (re-listed each read: workers can be
    replaced) and each client's wrk below its gate shim."""
    if env.cpu_transport is None:
        return lambda: []
    t = env.cpu_transport

    def nginx_procs() -> list[tuple[int, str, str, str]]:
        if ctx.nginx is None:
            return []
        return [(ctx.nginx.pid, ctx.server, "nginx", "master")] + [
            (w, ctx.server, "nginx", f"worker {i}") for i, w in enumerate(child_pids(t, ctx.nginx.pid))
        ]

    return tool_procs(t, nginx_procs, [(p.pid, client, "wrk", client) for client, p in procs])


def _pid_of(p: Process) -> Callable[[], list[int]]:
    return lambda: [p.pid]
