"""Pydantic validation errors as one-line InputErrors that name the file and key path.

Shared by plans and tuning profiles; imports no schema, so either can use it.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..core.errors import InputError

M = TypeVar("M", bound=BaseModel)

_HINTS = {
    "extra_forbidden": "check the spelling; see examples/*.toml for every key",
    "missing": "add the key; see examples/*.toml",
    "literal_error": None,
    "float_parsing": "write a plain number (seconds for durations): duration = 10",
    "float_type": "write a plain number (seconds for durations): duration = 10",
    "int_parsing": "write a whole number without quotes or units",
    "int_type": "write a whole number without quotes or units",
    "bool_parsing": "write true or false without quotes",
    "bool_type": "write true or false without quotes",
}


def _loc_text(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _model_at(loc: tuple[Any, ...], root: type[BaseModel]) -> type[BaseModel] | None:
    """The model class whose field list applies at ``loc`` (for 'allowed keys')."""
    model: type[BaseModel] | None = root
    skip_key = False
    for part in loc:
        if model is None:
            return None
        if skip_key:  # dict key level (e.g. hosts.<name>)
            skip_key = False
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return model
        ann = field.annotation
        args = getattr(ann, "__args__", ()) or ()
        nxt = None
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            nxt = ann
        elif getattr(ann, "__origin__", None) is dict and args and isinstance(args[-1], type) \
                and issubclass(args[-1], BaseModel):
            nxt, skip_key = args[-1], True
        else:
            for a in args:
                if isinstance(a, type) and issubclass(a, BaseModel):
                    nxt = a
        model = nxt
    return model


def _untag(loc: tuple[Any, ...], root: type[BaseModel]) -> tuple[tuple[Any, ...], type[BaseModel] | None]:
    """Drop the tag pydantic puts after a tagged union's field (``study.tcp.x``
    -> ``study.x``); the model the rest of ``loc`` is about."""
    out: list[Any] = []
    model: type[BaseModel] | None = root
    i = 0
    while i < len(loc):
        part = loc[i]
        out.append(part)
        field = model.model_fields.get(str(part)) if model else None
        model = None
        if field is not None:
            members = [a for a in _flat_args(field.annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
            if len(members) > 1 and i + 1 < len(loc):
                tagged = next((m for m in members if _kind_of(m) == loc[i + 1]), None)
                if tagged is not None:
                    model, i = tagged, i + 1
            elif members:
                model = members[0]
        i += 1
    return tuple(out), model


def _flat_args(ann: Any) -> list[Any]:
    args = list(getattr(ann, "__args__", ()) or ())
    out = []
    for a in args:
        inner = getattr(a, "__origin__", None)
        out += _flat_args(a) if inner is not None and getattr(a, "__args__", None) and not isinstance(a, type) else [a]
    return out or [ann]


def _kind_of(model: type[BaseModel]) -> str | None:
    f = model.model_fields.get("kind")
    args = getattr(f.annotation, "__args__", ()) if f else ()
    return str(args[0]) if args else None


def _format(err: dict[str, Any], root: type[BaseModel]) -> tuple[str, str, str | None]:
    loc, _ = _untag(tuple(err.get("loc", ())), root)
    typ = err.get("type", "")
    msg = str(err.get("msg", "invalid"))
    hint = _HINTS.get(typ)
    if typ == "extra_forbidden":
        _, parent = _untag(tuple(err.get("loc", ()))[:-1], root)
        parent = parent or _model_at(loc[:-1], root)
        allowed = ", ".join(parent.model_fields) if parent else "?"
        msg = f"unknown key {loc[-1]!r}; allowed here: {allowed}"
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    return _loc_text(loc), msg, hint


def validate(model: type[M], data: Any, source: str) -> M:
    """``model`` from parsed TOML; the first problem as one :class:`InputError`
    naming ``source`` and the key path (plans, tuning profiles)."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        errors = e.errors()
        where, msg, hint = _format(dict(errors[0]), model)
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise InputError(msg + more, where=f"{source}: {where}" if where else source, hint=hint) from None
