"""Tuning profiles: declared settings, validated before anything is touched.

A profile is data (TOML), shipped in ``tuning/profiles/`` or written in a
plan under ``[profiles.NAME]``.  Each setting has a ``kind``:

- ``sysctl``: ``key`` and ``value`` (``net.core.rmem_max = 16777216``);
- ``governor``: the CPU frequency governor for every CPU;
- ``service``: ``name`` and ``state = "stopped" | "running"`` (irqbalance, firewalld);
- ``tuned``: a tuned profile (``network-throughput``);
- ``irq_affinity``: ``policy = "nic-node"``: the NIC's queue IRQs onto the
  cores of its NUMA node, one queue per core (what t4_perftune.sh does);
- ``pinning``: the traffic tools run on ``cpus = "0-3"`` or, with
  ``policy = "nic-node"``, on the NIC's node, launched by ``numactl`` or
  ``taskset`` (seed 000's ``numactl -N n -m n``);
- ``ethtool``: ``feature = "ring" | "channels" | "coalesce" | "offload"`` with
  ``params`` (``{ rx = "max", tx = "max" }``, ``{ gro = "on" }``);
- ``rps``: receive packet steering on the test interface's receive queues:
  ``cpus = "all"`` (every online CPU of the host) or a CPU list, and
  ``flow_cnt`` (RFS's per-queue flow table) when given -- what spreads the
  receive work of a device without RSS queues or IRQs (a veth, a VM's NIC).

Unknown kinds, keys or values of the wrong type are refused by the schema,
so a typo fails before any host is changed.
"""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator, model_validator

from ..core.errors import InputError
from ..core.validation import validate

SYSCTL_KEY = r"^[a-z0-9_]+(\.[a-z0-9_-]+)+$"
CPU_LIST = r"^\d+(-\d+)?(,\d+(-\d+)?)*$"


def _forwards(cpus: str) -> str:
    """A CPU list whose ranges run forwards ("2-1" is refused)."""
    for part in cpus.split(","):
        a, _, b = part.partition("-")
        if b and int(b) < int(a):
            raise ValueError(f"CPU range {part!r} runs backwards")
    return cpus


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Setting(_Strict):
    """Every setting: applied on every host, all or nothing, unless it says
    it is optional (a host without it, or refusing it, is then reported and
    the run goes on)."""

    optional: bool = Field(False, description="a host that lacks or refuses this setting does not stop the run")


class Sysctl(_Setting):
    kind: Literal["sysctl"]
    key: str = Field(pattern=SYSCTL_KEY)
    value: int | str

    @field_validator("value")
    @classmethod
    def _plain(cls, v: int | str) -> int | str:
        if isinstance(v, str) and (not v.strip() or "\n" in v):
            raise ValueError("a sysctl value is one line of text or a number")
        return v


class Governor(_Setting):
    kind: Literal["governor"]
    value: Literal["performance", "powersave", "ondemand", "schedutil", "conservative", "userspace"]


class Service(_Setting):
    kind: Literal["service"]
    name: str = Field(pattern=r"^[A-Za-z0-9@._-]{1,64}$")
    state: Literal["stopped", "running"]


class Tuned(_Setting):
    kind: Literal["tuned"]
    profile: str = Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")


class IrqAffinity(_Setting):
    kind: Literal["irq_affinity"]
    policy: Literal["nic-node"] = "nic-node"


class Pinning(_Setting):
    kind: Literal["pinning"]
    policy: Literal["nic-node", "cpus"] = "nic-node"
    cpus: str | None = Field(None, pattern=CPU_LIST)
    # the Linux launcher; a FreeBSD host always uses cpuset(1) ("cpuset" here says
    # so and is refused on a Linux host, which has no cpuset -l)
    command: Literal["numactl", "taskset", "cpuset"] = "taskset"

    @model_validator(mode="after")
    def _policy_and_cpus(self) -> Pinning:
        if self.policy == "cpus" and not self.cpus:
            raise ValueError('policy = "cpus" needs cpus = "0-3" (a CPU list)')
        if self.policy == "nic-node" and self.cpus:
            raise ValueError('cpus is only for policy = "cpus"; "nic-node" finds the CPUs itself')
        return self

    @field_validator("cpus")
    @classmethod
    def _ranges(cls, v: str | None) -> str | None:
        return v if v is None else _forwards(v)


ETHTOOL_PARAMS = {
    "ring": {"rx", "tx", "rx-jumbo", "rx-mini"},
    "channels": {"rx", "tx", "other", "combined"},
    "coalesce": {"adaptive-rx", "adaptive-tx", "rx-usecs", "rx-frames", "tx-usecs", "tx-frames"},
    "offload": {"gro", "gso", "tso", "lro", "sg", "rx", "tx", "rxhash", "ntuple", "rx-gro-list",
                "rx-udp-gro-forwarding"},
}


class Ethtool(_Setting):
    kind: Literal["ethtool"]
    feature: Literal["ring", "channels", "coalesce", "offload"]
    params: dict[str, StrictInt | str]      # strict: TOML true is not 1

    @field_validator("params")
    @classmethod
    def _known(cls, v: dict[str, int | str], info) -> dict[str, int | str]:
        feature = info.data.get("feature")
        if not v:
            raise ValueError("give at least one parameter")
        allowed = ETHTOOL_PARAMS.get(str(feature), set())
        for k, x in v.items():
            if k not in allowed:
                raise ValueError(f"{feature} has no parameter {k!r}; allowed: {', '.join(sorted(allowed))}")
            if isinstance(x, bool):
                want = '"on" or "off"' if feature == "offload" or k.startswith("adaptive") else 'a number or "max"'
                raise ValueError(f"{k} takes {want}, not true/false")
            if feature == "offload" or k.startswith("adaptive"):
                if x not in ("on", "off"):
                    raise ValueError(f"{k} takes \"on\" or \"off\", not {x!r}")
            elif not (isinstance(x, int) and not isinstance(x, bool) and x >= 0 or x == "max"):
                raise ValueError(f"{k} takes a whole number or \"max\", not {x!r}")
        return v


class Rps(_Setting):
    kind: Literal["rps"]
    cpus: str = Field("all", pattern=r"^(all|\d+(-\d+)?(,\d+(-\d+)?)*)$")
    flow_cnt: StrictInt | None = Field(None, ge=0, le=1 << 20,
                                       description="rps_flow_cnt of each receive queue (RFS); unset: left alone")

    @field_validator("cpus")
    @classmethod
    def _ranges(cls, v: str) -> str:
        return v if v == "all" else _forwards(v)


Setting = Annotated[Sysctl | Governor | Service | Tuned | IrqAffinity | Pinning | Ethtool | Rps,
                    Field(discriminator="kind")]


class Profile(_Strict):
    """A named set of settings.  ``audit_only``: never applied (the stock profile)."""

    description: str = ""
    audit_only: bool = False
    settings: list[Setting] = Field(default_factory=list)

    @field_validator("settings")
    @classmethod
    def _unique(cls, v: list) -> list:
        seen = set()
        for s in v:
            ident = setting_id(s)
            if ident in seen:
                raise ValueError(f"setting {ident} is given twice")
            seen.add(ident)
        if sum(isinstance(s, Pinning) for s in v) > 1:
            raise ValueError("one pinning setting per profile")
        return v


def setting_id(s: BaseModel) -> str:
    """How a setting is named in tables and restore files."""
    if isinstance(s, Sysctl):
        return f"sysctl {s.key}"
    if isinstance(s, Service):
        return f"service {s.name}"
    if isinstance(s, Ethtool):
        return f"ethtool {s.feature}"
    return str(getattr(s, "kind", type(s).__name__))


def shipped() -> list[str]:
    """Names of the profiles that come with nicbench."""
    d = resources.files("nicbench.tuning") / "profiles"
    return sorted(p.name[:-5] for p in d.iterdir() if p.name.endswith(".toml"))


def is_file_ref(name: str) -> bool:
    """A profile named by its file (``tune recommend -o`` writes one), not by name."""
    return name.endswith(".toml") or "/" in name


def load_file(path: Path) -> Profile:
    """A profile from a TOML file, checked as a plan's profiles are: an unknown
    kind or key, or a value of the wrong type, is one line naming it."""
    try:
        text = path.read_text()
    except OSError as e:
        raise InputError(f"cannot read the profile: {e.strerror or e}", where=str(path),
                         hint="give a profile file (nicbench tune recommend RUN -o FILE writes one) or a "
                              f"profile's name ({', '.join(shipped())}, or a plan's [profiles.NAME])") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"not valid TOML: {e}", where=str(path)) from None
    return validate(Profile, data, str(path))


def load(name: str, user: dict[str, Profile] | None = None) -> Profile:
    """A profile by name: the plan's own first, then the shipped ones; or a
    profile file (a name ending in .toml or holding a /)."""
    if user and name in user:
        return user[name]
    if is_file_ref(name):
        return load_file(Path(name))
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,40}", name) or name not in shipped():
        raise InputError(f"no tuning profile {name!r}", where="tuning",
                         hint=f"shipped profiles: {', '.join(shipped())}; or define [profiles.{name}] in the plan")
    path = resources.files("nicbench.tuning") / "profiles" / f"{name}.toml"
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"not valid TOML: {e}", where=f"profile {name}") from None
    return validate(Profile, data, f"profile {name}")
