"""The plan's JSON Schema, for editors that check TOML against one (taplo,
VS Code's Even Better TOML) and for any standard JSON Schema validator.

pydantic writes it from the same models that validate plans, so the two never
disagree on which tables and keys exist; the unit-carrying fields (sizes,
speeds) say what strings they take (``plan/base.py``).  What only the models
can check (one server, a duration longer than its trim, hosts a study names)
stays with ``nicbench check``.
"""

from __future__ import annotations

from typing import Any

from .model import Plan
from .studies import DEFAULT_KIND, SCHEMAS

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def plan_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a plan file as TOML parses it."""
    schema = Plan.model_json_schema(mode="validation")
    schema["properties"]["study"] = study_by_kind(schema["properties"]["study"])
    return {"$schema": DIALECT, "title": "nicbench plan",
            "description": "A nicbench plan: hosts, link, study, tuning. 'nicbench check PLAN' validates "
                           "it fully; 'nicbench init' writes one.", **{k: v for k, v in schema.items()
                                                                       if k not in ("title", "description")}}


def study_by_kind(union: dict[str, Any]) -> dict[str, Any]:
    """``[study]`` as "kind picks the schema" (if/then per kind) instead of pydantic's
    oneOf: a validator then reports the actual mistake (an unknown key, a wrong
    value) rather than "valid under none of the schemas"."""
    refs = {ref["$ref"].rsplit("/", 1)[-1]: ref for ref in union.get("oneOf", [])}
    by_kind = {s.KIND: refs[s.__name__] for s in SCHEMAS if s.__name__ in refs}
    if len(by_kind) != len(SCHEMAS):        # pydantic named them otherwise: keep its union
        return union
    rules: list[dict[str, Any]] = [
        {"if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]}, "then": ref}
        for kind, ref in by_kind.items()]
    rules.append({"if": {"not": {"required": ["kind"]}}, "then": by_kind[DEFAULT_KIND]})
    return {"title": "Study", "type": "object", "description": f"what is measured; kind defaults to {DEFAULT_KIND!r}",
            "properties": {"kind": {"enum": list(by_kind), "default": DEFAULT_KIND}},
            "required": [], "allOf": rules}
