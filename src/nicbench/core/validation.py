"""Pydantic validation errors as one-line InputErrors that name the file and key path.

Shared by plans and tuning profiles; imports no schema, so either can use it.

What a reader most needs comes first: an unknown table or key is usually the
real mistake (``[studdy]`` also makes ``study`` "missing"), so unknown names
are reported before anything else, with the closest allowed name ("did you
mean"), and a "missing" error that such a suggestion explains is not counted
as a second problem.  A value outside a fixed set names the closest allowed
value too.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..core.errors import InputError

M = TypeVar("M", bound=BaseModel)

_HINTS = {
    "extra_forbidden": "check the spelling; 'nicbench schema' lists every key, 'nicbench init' writes a plan",
    "missing": "add the key; 'nicbench init --example NAME' writes a complete plan",
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


def closest(word: object, choices: list[str]) -> str | None:
    """The allowed name a typo most likely meant (difflib's ratio >= 0.6), or None."""
    got = difflib.get_close_matches(str(word), choices, n=1, cutoff=0.6)
    return got[0] if got else None


def _allowed_keys(err: dict[str, Any], root: type[BaseModel]) -> list[str]:
    loc = tuple(err.get("loc", ()))
    _, parent = _untag(loc[:-1], root)
    parent = parent or _model_at(_untag(loc, root)[0][:-1], root)
    return list(parent.model_fields) if parent else []


def _suggestion(err: dict[str, Any], root: type[BaseModel]) -> str | None:
    """For an unknown key: the allowed key it most likely meant."""
    if err.get("type") != "extra_forbidden":
        return None
    return closest(tuple(err.get("loc", ()))[-1], _allowed_keys(err, root))


def _choices(err: dict[str, Any]) -> list[str]:
    """The allowed values an enum-like error lists ('a', 'b' or 'c' / "a", "b")."""
    ctx = err.get("ctx") or {}
    text = str(ctx.get("expected") or ctx.get("expected_tags") or err.get("msg", ""))
    return re.findall(r"""['"]([^'"]+)['"]""", text)


def _format(err: dict[str, Any], root: type[BaseModel]) -> tuple[str, str, str | None]:
    loc, _ = _untag(tuple(err.get("loc", ())), root)
    typ = err.get("type", "")
    msg = str(err.get("msg", "invalid"))
    hint = _HINTS.get(typ)
    if typ == "extra_forbidden":
        allowed = _allowed_keys(err, root)
        guess = _suggestion(err, root)
        table = isinstance(err.get("input"), dict)
        what = f"unknown table [{_loc_text(loc)}]" if table else f"unknown key {loc[-1]!r}"
        mean = (f" (did you mean [{_loc_text((*loc[:-1], guess))}]?)" if table else f" (did you mean {guess!r}?)") \
            if guess else ""
        msg = f"{what}{mean}; allowed here: {', '.join(allowed) or '?'}"
        if len(loc) > 1 and not guess and str(loc[-1]) in root.model_fields:
            # TOML puts every key after a [table] header into that table
            hint = (f"{loc[-1]!r} is a top-level key: move it above the first [table] header "
                    "(TOML puts keys after a header into that table)")
    elif typ == "literal_error" or "expected_tags" in (err.get("ctx") or {}):
        choices = _choices(err)
        inp = err.get("input")
        disc = (err.get("ctx") or {}).get("discriminator")
        if isinstance(inp, dict) and disc:       # a tagged union: the tag's value is what is wrong
            disc = str(disc).strip("'\"")
            loc, inp = (*loc, disc), inp.get(disc)
        guess = closest(inp, choices) if isinstance(inp, str) else None
        msg = f"{inp!r} is not allowed: use {_or(choices)}" + (f" (did you mean {guess!r}?)" if guess else "") \
            if choices else msg
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
        # a model's own check names the key it is about ("study.trim: ..."): that key is the where
        m = re.match(rf"^({re.escape(_loc_text(loc))}\.[A-Za-z_][A-Za-z0-9_.\[\]]*): (.+)$", msg, re.S)
        if m and loc:
            return m.group(1), m.group(2), hint
    return _loc_text(loc), msg, hint


def _or(words: list[str]) -> str:
    quoted = [repr(w) for w in words]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def _ordered(errors: list[dict[str, Any]], root: type[BaseModel]) -> list[dict[str, Any]]:
    """Unknown names first; a 'missing' key that an unknown key's suggestion
    names (``[studdy]`` -> ``study``) is the same mistake and is dropped."""
    unknown = [e for e in errors if e.get("type") == "extra_forbidden"]
    meant = set()
    for e in unknown:
        guess = _suggestion(e, root)
        if guess is not None:
            meant.add(_untag((*tuple(e["loc"])[:-1], guess), root)[0])
    rest = [e for e in errors if e.get("type") != "extra_forbidden"
            and not (e.get("type") == "missing" and _untag(tuple(e.get("loc", ())), root)[0] in meant)]
    return unknown + rest


def validate(model: type[M], data: Any, source: str) -> M:
    """``model`` from parsed TOML; the first problem as one :class:`InputError`
    naming ``source`` and the key path (plans, tuning profiles)."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        errors = _ordered([dict(x) for x in e.errors()], model)
        where, msg, hint = _format(errors[0], model)
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise InputError(msg + more, where=f"{source}: {where}" if where else source, hint=hint) from None
