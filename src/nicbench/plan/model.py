"""The plan: a declarative TOML description of hosts, link and study.

Validated by pydantic with unknown keys forbidden, so a typo is an error, never
a silently ignored setting.  Units follow :mod:`nicbench.core.units`: sizes are
binary (``"4K"`` = 4096 B), durations are seconds.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, Union

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, ValidationInfo,
                      field_validator, model_validator)

from ..analysis.linerate import ModelError, parse_speed
from ..core.units import UnitError, parse_size
from ..tuning.profile import Profile

HOST_NAME = r"^[a-z][a-z0-9]{0,7}$"
LAB_NAME = r"^[a-z0-9]{1,8}$"


def _as_field(parse, errors: tuple[type[Exception], ...]):
    """A unit parser as a pydantic validator: its message becomes the field's error."""
    def validate(value: object):
        try:
            return parse(value)
        except errors as e:
            raise ValueError(str(e)) from None
    return BeforeValidator(validate)


Size = Annotated[int, _as_field(parse_size, (UnitError,))]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Host(Strict):
    """A host taking part.  In the embedded lab it becomes a network namespace;
    with ``ssh`` it is a real machine reached over SSH (then every host is)."""

    role: Literal["server", "client"]
    ssh: str | None = Field(None, min_length=1, max_length=255, pattern=r"^[A-Za-z0-9@._:%\[\]-]+$",
                            description="where to log in: an alias from ~/.ssh/config, a name or an address, "
                                        "optionally user@")
    user: str | None = Field(None, pattern=r"^[a-z_][a-z0-9_.-]{0,31}$")
    port: int | None = Field(None, ge=1, le=65535)
    identity: str | None = None
    ssh_args: list[str] = Field(default_factory=list, description="extra ssh arguments (an inventory's "
                                                                  "ansible_ssh_common_args)")
    sudo: bool = Field(False, description="run the tools through sudo -n")
    interface: str | None = Field(None, pattern=r"^[A-Za-z0-9_.:@-]{1,15}$", description="the test NIC (ssh hosts)")
    test_ip: str | None = Field(None, description="the address the study's traffic uses (ssh hosts)")

    @field_validator("test_ip")
    @classmethod
    def _ip(cls, v: str | None) -> str | None:
        if v is not None:
            import ipaddress
            try:
                ipaddress.ip_address(v)
            except ValueError:
                raise ValueError(f"{v!r} is not an IP address") from None
        return v


Speed = Annotated[float, _as_field(parse_speed, (ModelError,))]


class Link(Strict):
    """The test network's link settings (applied to every lab veth).

    ``speed`` shapes the server's link (both directions) to a line rate, e.g.
    ``"10G"`` (decimal bit/s); ``client_speed`` shapes every client's link too.
    Without a speed the lab's veths run as fast as the CPU allows and results
    carry no line-rate ceiling.
    """

    mtu: int = Field(1500, description="IP MTU in bytes (IPv4: 576..9216)")
    speed: Speed | None = None
    client_speed: Speed | None = None

    @field_validator("mtu")
    @classmethod
    def _mtu(cls, v: int) -> int:
        from ..analysis.linerate import ModelError, check_mtu
        try:
            check_mtu(v, 4)
        except ModelError as e:
            raise ValueError(str(e)) from None
        return v

    @field_validator("speed", "client_speed")
    @classmethod
    def _shapeable(cls, v: float | None) -> float | None:
        if v is not None and v < 1e6:
            raise ValueError("the lab shapes links from 1M (1 Mbit/s) up; a slower tbf rate is not meaningful")
        return v


class Lab(Strict):
    """Embedded-lab settings.  Namespaces are named ``nb-<name>-<host>``."""

    name: str = Field("lab", pattern=LAB_NAME)
    subnet: str = Field("198.18.0.0/24", description="RFC 2544 benchmarking range by default")
    transport: Literal["netns", "ssh"] = Field(
        "netns", description="how nicbench reaches the lab hosts: into their namespaces, or over SSH to an sshd "
                             "each host runs (the whole SSH path, tested on one machine)")
    max_clock_offset: float = Field(0.05, gt=0, le=10, description="ssh: the largest clock offset between this "
                                                                   "machine and a host that preflight accepts, s")

    @field_validator("subnet")
    @classmethod
    def _subnet(cls, v: str) -> str:
        import ipaddress
        try:
            net = ipaddress.IPv4Network(v, strict=True)
        except ValueError as e:
            raise ValueError(f"not an IPv4 network: {e}") from None
        if net.prefixlen > 28:
            raise ValueError("needs room for the hosts: use a /28 or larger")
        return v


class _Sweep(Strict):
    """A study: every list in ``SWEPT`` is a set of distinct values (a repeated
    one would run the same point twice under one key)."""

    SWEPT: ClassVar[tuple[str, ...]] = ()

    @field_validator("*")
    @classmethod
    def _unique(cls, v: object, info: ValidationInfo) -> object:
        if info.field_name in cls.SWEPT and isinstance(v, list) and len(set(v)) != len(v):
            raise ValueError("values must not repeat")
        return v


class TcpStudy(_Sweep):
    """Multi-client TCP throughput (seeds 000 and 002).

    The server host runs the engine's *client* processes towards an engine
    server on every client host (as both seeds do), so ``tx`` is server ->
    clients, ``rx`` is clients -> server (``-R``), ``bidir`` both at once.
    """

    SWEPT = ("directions", "io_sizes", "connections")
    kind: Literal["tcp"] = "tcp"
    engine: Literal["iperf3", "iperf2"] = "iperf3"
    clients: list[str] | None = Field(None, description="client hosts to use (default: all)")
    directions: list[Literal["tx", "rx", "bidir"]] = Field(default_factory=lambda: ["tx"], min_length=1)
    io_sizes: list[Size] = Field(default_factory=lambda: [131072], min_length=1)
    connections: list[Annotated[int, Field(ge=1, le=4096)]] = Field(default_factory=lambda: [1], min_length=1)
    connections_per: Literal["total", "client"] = "total"
    duration: float = Field(10.0, gt=0, le=3600, description="measured seconds asked of the engine")
    omit: float = Field(2.0, ge=0, le=600, description="warm-up seconds run before the measured part")
    interval: float = Field(1.0, ge=0.1, le=60, description="engine report interval, seconds")
    trim: float = Field(0.5, ge=0, description="seconds cut from both ends of the shared window")
    repeats: int = Field(1, ge=1, le=100)
    order: Literal["interleaved", "sequential"] = "interleaved"
    zerocopy: bool = False
    no_delay: bool = False
    skip_rx_copy: bool | Literal["auto"] = False
    window: Size | None = None
    congestion: str | None = Field(None, pattern=r"^[a-z0-9_]{1,16}$")
    streams_per_process: int | None = Field(None, ge=1, le=128)
    port_base: int = Field(5201, ge=1024, le=65000)
    timeout_margin: float = Field(15.0, ge=1, le=600, description="extra seconds before a point is declared hung")

    @model_validator(mode="after")
    def _engine_features(self) -> "TcpStudy":
        if self.engine == "iperf2" and (self.zerocopy or self.skip_rx_copy is True):
            raise ValueError("iperf2 has no zerocopy/skip_rx_copy: set them false or use engine = \"iperf3\"")
        if self.engine == "iperf3":
            big = [n for n in self.io_sizes if n > 1024 * 1024]
            if big:
                raise ValueError(f"study.io_sizes: iperf3 takes blocks up to 1M, not {big[0]} bytes")
            for key in ("duration", "omit"):
                v = getattr(self, key)
                if v != int(v):
                    raise ValueError(f"study.{key} = {v}: iperf3 takes whole seconds for -t and -O")
        if self.duration <= 2 * self.trim:
            raise ValueError(f"duration {self.duration}s leaves nothing after trimming {self.trim}s at both ends")
        return self


class HttpsStudy(_Sweep):
    """HTTPS bulk throughput with nginx and wrk (seed 001).

    nginx serves one payload file of ``file_size`` from the study server over
    TLS (and plain HTTP for the ``"http"`` baseline); wrk on every client host
    fetches it over keep-alive connections for ``duration`` seconds.
    ``connections`` counts all clients together (the seed: 10..100).
    """

    SWEPT = ("schemes", "connections", "tls_versions", "threads")
    kind: Literal["https"]
    clients: list[str] | None = Field(None, description="client hosts to use (default: all)")
    schemes: list[Literal["https", "http"]] = Field(default_factory=lambda: ["https"], min_length=1)
    connections: list[Annotated[int, Field(ge=1, le=10000)]] = Field(default_factory=lambda: [10], min_length=1)
    threads: list[Annotated[int, Field(ge=1, le=64)]] = Field(
        default_factory=lambda: [2], min_length=1, description="wrk threads per client, swept (capped at its connections)")
    duration: int = Field(10, ge=1, le=3600, description="seconds each wrk runs (whole seconds)")
    file_size: Size = Field(64 * 1024 * 1024, description="the payload file (seed: 2G)")
    tls_versions: list[Literal["1.2", "1.3"]] = Field(default_factory=lambda: ["1.3"], min_length=1)
    ciphers: str = Field("HIGH:!aNULL:!MD5", pattern=r"^[A-Za-z0-9:!+@_.-]{1,200}$")
    ciphersuites: str | None = Field(None, pattern=r"^[A-Z0-9_:]{1,200}$")
    ktls: bool = Field(True, description="ask OpenSSL for kernel TLS (ssl_conf_command Options KTLS)")
    workers: Literal["auto"] | Annotated[int, Field(ge=1, le=256)] = "auto"
    repeats: int = Field(1, ge=1, le=100)
    order: Literal["interleaved", "sequential"] = "interleaved"
    https_port: int = Field(443, ge=1, le=65535)
    http_port: int = Field(80, ge=1, le=65535)
    timeout_margin: float = Field(15.0, ge=1, le=600, description="extra seconds before a point is declared hung")

    @field_validator("threads", mode="before")
    @classmethod
    def _one_or_many(cls, v: object) -> object:
        return [v] if isinstance(v, int) else v

    @model_validator(mode="after")
    def _sizes(self) -> "HttpsStudy":
        if self.file_size < 1024:
            raise ValueError("study.file_size: at least 1K, or every request is mostly headers")
        if self.https_port == self.http_port:
            raise ValueError("study.https_port and study.http_port must differ")
        return self

    @property
    def trim(self) -> float:
        """Nothing is trimmed: wrk reports one total per run (see analysis.https)."""
        return 0.0


class StorageStudy(_Sweep):
    """Block I/O over the network (seed 004): one target exporting LUNs, the
    client hosts as initiators, fio through the engine that fits the target.

    In the lab the target is nbdkit (``lun_kind`` memory or null, one export
    per LUN); LUNs are split evenly over the initiators (the seed: 48 LUNs, 4
    initiators x 12).  MB/s are 10^6 bytes per second, as the seed reports.
    """

    SWEPT = ("ops", "block_sizes")
    kind: Literal["storage"]
    clients: list[str] | None = Field(None, description="initiator hosts (default: all clients)")
    target: Literal["nbd", "iscsi", "devices"] = "nbd"
    devices: dict[str, list[Annotated[str, Field(pattern=r"^/dev/[A-Za-z0-9/_.-]+$")]]] | None = Field(
        None, description='target = "devices": block devices per initiator (LUNs the host already sees)')
    engine: Literal["libaio", "io_uring"] = Field("libaio", description='fio engine for target = "devices"')
    transport: Literal["nbd", "iscsi", "nvme-tcp", "fcoe"] | None = Field(
        None, description='target = "devices": what carries them, for the line-rate ceiling')
    destructive: bool = Field(False, description="allow writes to existing block devices (their data is lost)")
    lun_kind: Literal["memory", "null"] = "memory"
    luns: int = Field(4, ge=1, le=256)
    lun_size: Size = Field(256 * 1024 * 1024)
    ops: list[Literal["read", "write", "readwrite"]] = Field(default_factory=lambda: ["read"], min_length=1)
    block_sizes: list[Size] = Field(default_factory=lambda: [4096], min_length=1)
    pattern: Literal["sequential", "random"] = "sequential"
    iodepth: int = Field(16, ge=1, le=1024)
    numjobs: int = Field(1, ge=1, le=64)
    duration: int = Field(5, ge=1, le=3600, description="measured seconds (fio runtime, whole seconds)")
    ramp: int = Field(1, ge=0, le=600, description="seconds of I/O before measuring (fio ramp_time)")
    repeats: int = Field(1, ge=1, le=100)
    order: Literal["interleaved", "sequential"] = "interleaved"
    port_base: int = Field(10809, ge=1024, le=65000, description="NBD: the first LUN's port")
    iscsi_port: int = Field(3260, ge=1, le=65535, description="iSCSI: the portal's port")
    timeout_margin: float = Field(15.0, ge=1, le=600, description="extra seconds before a point is declared hung")

    @model_validator(mode="before")
    @classmethod
    def _luns_from_devices(cls, data: object) -> object:
        """With existing devices, the LUN count is theirs."""
        if isinstance(data, dict) and isinstance(data.get("devices"), dict) and "luns" not in data:
            data = {**data, "luns": sum(len(v) for v in data["devices"].values() if isinstance(v, list)) or 1}
        return data

    @model_validator(mode="after")
    def _sizes(self) -> "StorageStudy":
        for bs in self.block_sizes:
            if bs < 512 or bs % 512:
                raise ValueError(f"study.block_sizes: {bs} is not a multiple of 512 bytes (direct I/O)")
            if bs > self.lun_size:
                raise ValueError(f"study.block_sizes: {bs} is larger than a LUN ({self.lun_size} bytes)")
        if self.transport is not None and self.target != "devices":
            raise ValueError(f'study.transport is only for target = "devices" ({self.target} is its own transport)')
        if self.target == "devices":
            if self.transport is None:
                raise ValueError('study.transport: say what carries the devices ("iscsi", "nvme-tcp", "fcoe", '
                                 '"nbd"), for the line-rate ceiling')
            for h, devs in (self.devices or {}).items():
                if len(set(devs)) != len(devs):
                    raise ValueError(f"study.devices.{h}: a device is listed twice")
            if self.devices and self.luns != sum(len(v) for v in self.devices.values()):
                raise ValueError(f"study.luns = {self.luns}, but study.devices lists "
                                 f"{sum(len(v) for v in self.devices.values())}: leave luns out")
            if not self.devices:
                raise ValueError('study.devices: target = "devices" needs the block devices per initiator, '
                                 'e.g. devices = { i1 = ["/dev/sdb"] }')
            if any(op != "read" for op in self.ops) and not self.destructive:
                raise ValueError("study.ops: writing to existing block devices destroys their data: "
                                 "set destructive = true if that is meant")
        elif self.devices:
            raise ValueError('study.devices is only for target = "devices"')
        if self.target == "iscsi":
            if any(op != "read" for op in self.ops):
                raise ValueError("study.ops: the lab's iSCSI initiator (iscsi-perf) only reads; "
                                 "use target = \"nbd\" for writes")
            if self.lun_kind != "null":
                raise ValueError("study.lun_kind: the lab's iSCSI LUNs are tgt null LUNs: set lun_kind = \"null\"")
            if self.numjobs != 1:
                raise ValueError("study.numjobs: iscsi-perf runs one stream per LUN: leave numjobs = 1")
            if self.timeout_margin < 8:
                raise ValueError("study.timeout_margin: iscsi-perf needs >= 8 s to be interrupted, drain and log out")
        return self

    @property
    def trim(self) -> float:
        """fio's ramp_time does the warm-up; nothing more is trimmed."""
        return 0.0


NBGEN_MAX_FRAME = 3408 + 4     # live frames: a page less XDP headroom, skb_shared_info and the page head (measured: 3409 B is EINVAL), + FCS


class PacketStudy(_Sweep):
    """Packet rate (seed 003): a generator and a receiver, back to back.

    The study server is the generator (the host under test, as in the seed:
    pkt-gen transmits); the receiver is the study's one client.  ``ports``
    back-to-back links join them (the seed: single and dual port), each
    driven by its own generator process with ``threads`` threads (= queues).
    Frame sizes count from the destination MAC to the FCS (RFC 2544).  The
    receiver counts the test flow with an XDP program and drops it.

    ``line_rate`` is each port's nominal speed, for the ceiling: the lab does
    not shape these links -- XDP transmit and trafgen's qdisc bypass both go
    around tc, so a rate here is the generator's ``rate``, never a qdisc's.
    """

    SWEPT = ("engines", "frame_sizes", "ports", "threads", "ip_versions")
    kind: Literal["packets"]
    clients: list[str] | None = Field(None, description="the receiver host (default: the one client)")
    engines: list[Literal["nbgen", "trafgen"]] = Field(default_factory=lambda: ["nbgen"], min_length=1)
    frame_sizes: list[Annotated[int, Field(ge=1, le=9234)]] = Field(
        default_factory=lambda: [64], min_length=1, description="bytes with FCS (64 .. MTU + 18)")
    ports: list[Annotated[int, Field(ge=1, le=4)]] = Field(default_factory=lambda: [1], min_length=1)
    threads: list[Annotated[int, Field(ge=1, le=64)]] = Field(
        default_factory=lambda: [1], min_length=1, description="generator threads (queues) per port")
    ip_versions: list[Literal[4, 6]] = Field(default_factory=lambda: [4], min_length=1)
    duration: float = Field(5.0, gt=0, le=3600, description="seconds each generator sends")
    trim: float = Field(0.5, ge=0, description="seconds cut from both ends of the measured window")
    rate: float | None = Field(None, gt=0, description="frames/s per port (rate-limited mode); none: as fast as "
                                                       "the engine can")
    line_rate: Speed = Field(10e9, description="each port's nominal speed, for the ceiling (e.g. \"40G\")")
    search: Literal["none", "ndr"] = Field("none", description="ndr: bisect for the highest rate whose loss "
                                                              "is at most loss_threshold")
    loss_threshold: float = Field(0.001, ge=0, lt=1, description="ndr: the loss allowed, a fraction (0.001 = 0.1 %)")
    search_steps: int = Field(6, ge=1, le=20, description="ndr: bisection steps after the unpaced one")
    xdp_mode: Literal["auto", "native", "generic"] = Field(
        "auto", description="receiver's XDP attach: auto tries native, falls back to generic and says so")
    interfaces: dict[str, list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:@-]{1,15}$")]]] | None = Field(
        None, description="real hosts: each host's port NICs, in port order, e.g. { gen = [\"ens1f0\", "
                          "\"ens1f1\"], sink = [\"ens2f0\", \"ens2f1\"] } (the lab names its own pk0, pk1, ...)")
    udp_port: int = Field(9, ge=1, le=65535)
    repeats: int = Field(1, ge=1, le=100)
    order: Literal["interleaved", "sequential"] = "interleaved"
    timeout_margin: float = Field(15.0, ge=1, le=600, description="extra seconds before a point is declared hung")

    @field_validator("threads", "ports", "frame_sizes", "engines", "ip_versions", mode="before")
    @classmethod
    def _one_or_many(cls, v: object) -> object:
        return [v] if isinstance(v, (int, str)) else v

    @model_validator(mode="after")
    def _sizes(self) -> "PacketStudy":
        from ..tools.frames import min_frame
        for ip in self.ip_versions:
            small = [f for f in self.frame_sizes if f < min_frame(ip)]
            if small:
                raise ValueError(f"study.frame_sizes: {small[0]} is below the {min_frame(ip)}-byte minimum "
                                 f"(an Ethernet frame is at least 64 bytes with its FCS"
                                 f"{'; Ethernet + IPv6 + UDP headers + FCS take 66' if ip == 6 else ''})")
        if "nbgen" in self.engines:
            big = [f for f in self.frame_sizes if f > NBGEN_MAX_FRAME]
            if big:
                raise ValueError(f"study.frame_sizes: {big[0]} bytes does not fit nbgen's live frames (one page: "
                                 f"at most {NBGEN_MAX_FRAME} with the FCS); use engines = [\"trafgen\"] for jumbo "
                                 "frames")
        if self.duration <= 2 * self.trim:
            raise ValueError(f"study.duration {self.duration}s leaves nothing after trimming {self.trim}s at both ends")
        if self.search == "ndr" and self.rate:
            raise ValueError("study.rate: the no-drop-rate search chooses the rate itself; leave rate out")
        return self


def _study_kind(v: object) -> str:
    """``kind`` picks the study; a plan without it is a TCP study."""
    if isinstance(v, dict):
        return str(v.get("kind", "tcp"))
    return str(getattr(v, "kind", "tcp"))


Study = Annotated[Union[Annotated[TcpStudy, Tag("tcp")], Annotated[HttpsStudy, Tag("https")],
                        Annotated[StorageStudy, Tag("storage")], Annotated[PacketStudy, Tag("packets")]],
                  Discriminator(_study_kind, custom_error_type="study_kind",
                                custom_error_message='study.kind must be "tcp", "https", "storage" or "packets"')]


class Output(Strict):
    dir: str = "nicbench-runs"


class Plan(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    description: str = ""
    lab: Lab = Field(default_factory=Lab)
    link: Link = Field(default_factory=Link)
    hosts: dict[Annotated[str, Field(pattern=HOST_NAME)], Host]
    study: Study
    output: Output = Field(default_factory=Output)
    tuning: str | None = Field(None, description="a tuning profile applied before the first point, "
                                                 "restored after the last")
    profiles: dict[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,40}$")], Profile] = Field(default_factory=dict)
    inventory: str | None = Field(None, description="an Ansible inventory (INI or YAML) the hosts come from, "
                                                    "relative to the plan")

    @property
    def remote(self) -> bool:
        """Real hosts over SSH (no lab is built)."""
        return any(h.ssh for h in self.hosts.values())

    @model_validator(mode="after")
    def _roles(self) -> "Plan":
        servers = [n for n, h in self.hosts.items() if h.role == "server"]
        clients = [n for n, h in self.hosts.items() if h.role == "client"]
        if len(servers) != 1:
            raise ValueError(f"exactly one host needs role = \"server\", found {len(servers)}")
        if not clients:
            raise ValueError("at least one host needs role = \"client\"")
        if "machine" in self.hosts:
            raise ValueError("'machine' names the lab's own machine in facts and tuning: pick another host name")
        if self.tuning is not None:
            from ..tuning.profile import shipped
            if self.tuning not in self.profiles and self.tuning not in shipped():
                raise ValueError(f"tuning = {self.tuning!r} is neither a shipped profile ({', '.join(shipped())}) "
                                 "nor defined under [profiles]")
        if any(h.ssh for h in self.hosts.values()):
            missing = [n for n, h in self.hosts.items() if not h.ssh or not h.test_ip]
            if missing:
                raise ValueError(f"hosts reached over SSH each need ssh and test_ip; {', '.join(missing)} lack(s) "
                                 "them (or take them from an inventory: nicbench_test_ip)")
            if isinstance(self.study, PacketStudy):
                need = max(self.study.ports)
                for h in (self.server, *(self.study.clients or [n for n, x in self.hosts.items() if x.role == "client"])[:1]):
                    got = (self.study.interfaces or {}).get(h, [])
                    if len(got) < need:
                        raise ValueError(f"study.interfaces.{h}: a packets study on real hosts names each host's port "
                                         f"NICs in order; {h} needs {need} (ports = {self.study.ports}), has {len(got)}")
            if self.link.client_speed:
                raise ValueError("link.client_speed shapes lab links; real hosts are not shaped: give their NIC "
                                 "speed as link.speed (the ceiling)")
        elif len(self.hosts) > 13:
            raise ValueError("the embedded lab holds at most 13 hosts")
        if isinstance(self.study, StorageStudy) and self.study.devices:
            for h in self.study.devices:
                if h not in self.hosts or self.hosts[h].role != "client":
                    raise ValueError(f"study.devices names {h!r}, which is not a client host")
            used = set(self.study.clients or clients)
            if set(self.study.devices) != used:
                raise ValueError(f"study.devices must list every initiator ({', '.join(sorted(used))}) and only "
                                 f"them; it lists {', '.join(sorted(self.study.devices))}")
        elif isinstance(self.study, StorageStudy):
            n = len(self.study.clients or clients)
            if self.study.luns < n:
                raise ValueError(f"study.luns = {self.study.luns} is fewer than the {n} initiators: every "
                                 "initiator needs at least one LUN")
        if isinstance(self.study, PacketStudy) and self.study.interfaces and not any(h.ssh for h in self.hosts.values()):
            raise ValueError("study.interfaces is for real hosts: the lab names its back-to-back ports pk0, pk1, ...")
        if isinstance(self.study, PacketStudy):
            rx = self.study.clients or clients
            if len(rx) != 1:
                raise ValueError(f"a packets study has one receiver: name it in study.clients (clients here: "
                                 f"{', '.join(rx)})")
            frame_max = self.link.mtu + 18
            big = [f for f in self.study.frame_sizes if f > frame_max]
            if big:
                raise ValueError(f"study.frame_sizes: {big[0]} bytes is above the MTU ({self.link.mtu} + 18 "
                                 f"header and FCS = {frame_max}): raise link.mtu for jumbo frames")
            if self.link.speed or self.link.client_speed:
                raise ValueError("link.speed shapes TCP links with tbf, which XDP and trafgen's qdisc bypass go "
                                 "around: give the ports' nominal speed as study.line_rate, and a generator "
                                 "rate as study.rate")
        if isinstance(self.study, HttpsStudy):
            n = len(self.study.clients or clients)
            few = [c for c in self.study.connections if c < n]
            if few:
                raise ValueError(f"study.connections = {few[0]} is fewer than the {n} clients: every client "
                                 "needs at least one connection")
        for c in self.study.clients or []:
            if c not in self.hosts:
                raise ValueError(f"study.clients names host {c!r}, which is not in [hosts] "
                                 f"(defined: {', '.join(self.hosts)})")
            if self.hosts[c].role != "client":
                raise ValueError(f"study.clients names {c!r}, whose role is {self.hosts[c].role!r}")
        return self

    @property
    def server(self) -> str:
        return next(n for n, h in self.hosts.items() if h.role == "server")

    @property
    def clients(self) -> list[str]:
        if self.study.clients:
            return list(self.study.clients)
        return [n for n, h in self.hosts.items() if h.role == "client"]
