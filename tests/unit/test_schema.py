"""``nicbench schema`` is a JSON Schema a standard validator (jsonschema) uses
as is: every example passes, and the mistakes the plan models refuse for
unknown or misspelt names, values and units are refused by it too."""

from __future__ import annotations

import glob
import json
import subprocess
import sys
import tomllib

import jsonschema
import pytest

from conftest import FIXTURES, ROOT
from nicbench.core.errors import InputError
from nicbench.plan import parse_plan

PLANS = sorted(glob.glob(str(ROOT / "examples" / "*.toml")) + glob.glob(str(FIXTURES / "runs" / "*" / "plan.toml")))


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    p = subprocess.run([sys.executable, "-m", "nicbench.cli.main", "schema"], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    schema = json.loads(p.stdout)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.split("/")[-1] if "examples" in p else p.split("/")[-2])
def test_every_example_passes_the_schema(validator, path):
    with open(path, "rb") as f:
        data = tomllib.load(f)
    assert [e.message for e in validator.iter_errors(data)] == []


BASE = """name = "t"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
"""


@pytest.mark.parametrize("study", [
    '[study]\nkind = "tcp"\nio_sizes = ["4K", "64KiB", 512, "1024B"]\n',
    '[study]\nio_sizes = ["1M"]\n',                               # kind defaults to tcp
    '[study]\nkind = "packets"\nthreads = 2\nframe_sizes = 64\n',  # one value for a swept list
    '[study]\nkind = "https"\nthreads = [1, 2]\n',
    '[link]\nspeed = "2.5G"\n[study]\nkind = "tcp"\n',
    '[link]\nspeed = "10 Gbit/s"\n[study]\nkind = "tcp"\n',
])
def test_what_the_plan_accepts_the_schema_accepts(validator, study):
    text = BASE + study
    parse_plan(text)
    assert [e.message for e in validator.iter_errors(tomllib.loads(text))] == []


@pytest.mark.parametrize("study", [
    '[studdy]\nkind = "tcp"\n',
    '[study]\nkind = "tcp"\ndurration = 3\n',
    '[study]\nkind = "tpc"\n',
    '[study]\nkind = "tcp"\nengine = "iperf"\n',
    '[study]\nkind = "tcp"\nio_sizes = ["8kB"]\n',
    '[study]\nkind = "tcp"\nio_sizes = ["10 Gb"]\n',
    '[link]\nspeed = 10\n[study]\nkind = "tcp"\n',
    '[link]\nspeed = "10GB"\n[study]\nkind = "tcp"\n',
    '[study]\nkind = "packets"\nengines = ["pktgen"]\n',
])
def test_what_the_plan_refuses_by_name_value_or_unit_the_schema_refuses(validator, study):
    text = BASE + study
    with pytest.raises(InputError):
        parse_plan(text)
    assert list(validator.iter_errors(tomllib.loads(text)))


def test_schema_out_writes_a_file(tmp_path):
    out = tmp_path / "plan.schema.json"
    p = subprocess.run([sys.executable, "-m", "nicbench.cli.main", "schema", "--out", str(out)], capture_output=True,
                       text=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0 and str(out) in p.stderr
    assert json.loads(out.read_text())["title"] == "nicbench plan"


@pytest.mark.parametrize("study, needle", [
    ('[study]\nkind = "tcp"\ndurration = 3\n', "'durration' was unexpected"),
    ('[study]\ndurration = 3\n', "'durration' was unexpected"),                    # kind left to its default
    ('[study]\nkind = "packets"\nengines = ["pktgen"]\n', "'pktgen' is not one of"),
    ('[study]\nkind = "tpc"\n', "'tpc' is not one of"),
    ('[study]\nkind = "tcp"\nio_sizes = ["8kB"]\n', "'8kB' does not match"),
])
def test_an_editor_is_told_the_actual_mistake_not_none_of_the_union(validator, study, needle):
    """kind picks the study's schema (if/then), so the error is about the key or value, not 'oneOf'."""
    errors = list(validator.iter_errors(tomllib.loads(BASE + study)))
    messages = [e.message for e in errors]
    assert any(needle in m for m in messages), messages
    assert not any("oneOf" in m or "anyOf" in m for m in messages), messages
