"""The one-line error every failure ends in."""

from nicbench.core.errors import InputError, PreflightError, ToolError


def test_a_where_that_repeats_the_kind_is_said_once():
    # the audit saw "nicbench: preflight: preflight: c1: iperf3 not found"
    e = PreflightError("c1: iperf3 not found", where="preflight", hint="install it")
    assert e.one_line() == "nicbench: preflight: c1: iperf3 not found (hint: install it)"


def test_where_and_hint_are_kept_and_newlines_folded():
    e = ToolError("iperf3 on c2:5202 said\n  unable to connect", where="c2", hint="is the server up?")
    assert e.one_line() == "nicbench: tool: c2: iperf3 on c2:5202 said unable to connect (hint: is the server up?)"
    assert InputError("bad key", where="plan.toml").one_line() == "nicbench: bad input: plan.toml: bad key"
