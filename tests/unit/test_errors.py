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


def test_control_and_bidi_characters_are_printed_as_escapes(capsys, tmp_path):
    """The audit's case: a right-to-left override (U+202E) in a plan's path was
    echoed raw, reversing the rest of the error line on the terminal; an ESC
    sequence from a tool's stderr would recolour it."""
    from conftest import run_cli
    e = ToolError("iperf3 said \x1b[31mred\x07", where="c\u202e1", hint="zero\u200bwidth")
    assert e.one_line() == "nicbench: tool: c\\u202e1: iperf3 said \\x1b[31mred\\x07 (hint: zero\\u200bwidth)"
    assert ToolError("é ü 日本", where="c1").one_line() == "nicbench: tool: c1: é ü 日本"   # letters stay letters
    code, _, err = run_cli(capsys, "check", tmp_path / "evil\u202elmot.toml")
    assert code == 2 and "evil\\u202elmot.toml" in err and "\u202e" not in err
