"""What every part of a plan is built from: strict models, unit-checked fields,
and the base class of a study's schema.

A study's schema (``plan/studies/<kind>.py``) says what the study sweeps and
how its points are named; the plan checks the rest.  Units follow
:mod:`nicbench.core.units`: sizes are binary (``"4K"`` = 4096 B), durations
are seconds, speeds decimal bit/s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, WithJsonSchema, field_validator

from ..core.linerate import ModelError, parse_speed
from ..core.units import UnitError, parse_size

HOST_NAME = r"^[a-z][a-z0-9]{0,7}$"
LAB_NAME = r"^[a-z0-9]{1,8}$"


def as_field(parse: Callable[[Any], Any], errors: tuple[type[Exception], ...]) -> BeforeValidator:
    """A unit parser as a pydantic validator: its message becomes the field's error."""
    def validate(value: object) -> Any:
        try:
            return parse(value)
        except errors as e:
            raise ValueError(str(e)) from None
    return BeforeValidator(validate)


# What a plan may write, for the JSON Schema editors check plans against (``nicbench schema``):
# the parsers above accept more spellings than JSON Schema can say, never fewer.
SIZE_SCHEMA: dict[str, Any] = {
    # one schema for both forms (minimum applies to numbers, pattern to strings), so a validator's
    # error names the pattern rather than "valid under none of anyOf"
    "type": ["integer", "string"], "minimum": 1, "pattern": r"^\s*[0-9]+\s*([KMGkmg](iB)?|B)?\s*$",
    "description": "bytes: 512, or a binary multiple: \"4K\" = \"4KiB\" = 4096 (\"4kB\" is refused as ambiguous)"}
SPEED_SCHEMA: dict[str, Any] = {
    "type": "string", "pattern": r"^\s*[0-9]+(\.[0-9]+)?\s*[kKmMgGtT]\s*(b|b/s|bps|[bB][iI][tT][sS]?(/[sS])?)?\s*$",
    "description": "bit/s with a decimal prefix: \"100M\", \"2.5G\", \"10G\""}

Size = Annotated[int, as_field(parse_size, (UnitError,)), WithJsonSchema(SIZE_SCHEMA)]
Speed = Annotated[float, as_field(parse_speed, (ModelError,)), WithJsonSchema(SPEED_SCHEMA)]


def one_or_many(schema: dict[str, Any]) -> None:
    """JSON Schema of a swept list whose validator also takes one value (``threads = 2``):
    if/then/else on the type rather than anyOf, so a validator names the wrong value."""
    items = schema.get("items")
    if isinstance(items, dict):
        many = {k: schema.pop(k) for k in ("type", "items", "minItems", "maxItems") if k in schema}
        schema.update({"if": {"type": "array"}, "then": many, "else": items})


class HostLike(Protocol):
    @property
    def role(self) -> str: ...


class LinkLike(Protocol):
    @property
    def mtu(self) -> int: ...
    @property
    def speed(self) -> float | None: ...
    @property
    def client_speed(self) -> float | None: ...


class PlanLike(Protocol):
    """What a study's schema may ask of the plan around it (``model.Plan``)."""

    @property
    def hosts(self) -> Mapping[str, HostLike]: ...
    @property
    def link(self) -> LinkLike: ...
    @property
    def server(self) -> str: ...
    @property
    def clients(self) -> list[str]: ...
    @property
    def remote(self) -> bool: ...


class Strict(BaseModel):
    """Unknown keys are errors (a typo is never a silently ignored setting); frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class StudySchema(Strict):
    """The part of the plan under ``[study]``: one subclass per study kind.

    Every list named in ``SWEPT`` is a set of distinct values (a repeated one
    would run the same point twice under one key).  A subclass gives its
    ``kind`` as a ``Literal`` field, lists its points in :meth:`points`, and
    checks what depends on the rest of the plan in :meth:`check_plan`.
    """

    SWEPT: ClassVar[tuple[str, ...]] = ()
    KIND: ClassVar[str] = ""

    kind: str
    clients: list[str] | None = Field(None, description="client hosts to use (default: all)")
    repeats: int = Field(1, ge=1, le=100)
    order: Literal["interleaved", "sequential"] = "interleaved"
    timeout_margin: float = Field(15.0, ge=1, le=600, description="extra seconds before a point is declared hung")

    @field_validator("*")
    @classmethod
    def _unique(cls, v: object, info: ValidationInfo) -> object:
        if info.field_name in cls.SWEPT and isinstance(v, list) and len(set(v)) != len(v):
            raise ValueError("values must not repeat")
        return v

    def points(self) -> list[tuple[str, dict[str, Any]]]:
        """(point key, parameters) of every point, in sweep order."""
        raise NotImplementedError

    def back_to_back(self, plan: PlanLike) -> tuple[int, int] | None:
        """(ports, queues) of direct links from the server to the first client
        the study needs besides the switch, or None."""
        return None

    def check_plan(self, plan: PlanLike) -> None:
        """What this study needs of the hosts and link; raise ValueError."""

    def measured_seconds(self) -> float:
        """Seconds of traffic one trial asks for, warm-up included (for ``nicbench check``)."""
        raise NotImplementedError


def trim_problem(duration: float, trim: float, trim_given: bool) -> str:
    """Why ``duration`` is too short for ``trim`` seconds cut at both ends, and
    what to change -- saying so when the trim is a default the plan never wrote."""
    if trim_given:
        return (f"study.duration: {duration:g} s leaves nothing after trimming study.trim = {trim:g} s at both "
                f"ends: make the duration longer than {2 * trim:g} s or the trim shorter")
    return (f"study.duration: {duration:g} s leaves nothing after the default study.trim = {trim:g} s is cut at "
            f"both ends: set a longer duration (more than {2 * trim:g} s), or a shorter trim, e.g. trim = "
            f"{duration / 4:g}")
