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

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def plan_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a plan file as TOML parses it."""
    schema = Plan.model_json_schema(mode="validation")
    return {"$schema": DIALECT, "title": "nicbench plan",
            "description": "A nicbench plan: hosts, link, study, tuning. 'nicbench check PLAN' validates "
                           "it fully; 'nicbench init' writes one.", **{k: v for k, v in schema.items()
                                                                       if k not in ("title", "description")}}
