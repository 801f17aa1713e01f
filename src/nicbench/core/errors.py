"""One error taxonomy for the whole tool.

Every failure a user can cause or meet is a :class:`NicbenchError` subclass that
knows where it happened (file/key, host, command), what went wrong, a hint for
the fix, and a distinct process exit code.  The CLI prints ``one_line()``; a
traceback only appears with ``--debug``.
"""

from __future__ import annotations

import signal
import unicodedata


class NicbenchError(Exception):
    """Base class.  ``where`` names the file/key path, host or command."""

    exit_code = 1
    kind = "error"

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where
        self.hint = hint

    def one_line(self) -> str:
        # "preflight: preflight:" said nothing twice: a where that only repeats the kind is left out
        where = f"{self.where}: " if self.where and self.where != self.kind else ""
        hint = f" (hint: {self.hint})" if self.hint else ""
        text = f"nicbench: {self.kind}: {where}{self.message}{hint}"
        return visible(" ".join(text.split()))  # tool stderr tails may carry newlines

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "where": self.where, "message": self.message,
                "hint": self.hint, "exit_code": self.exit_code}


class InputError(NicbenchError):
    """A plan, argument or input file is wrong; nothing was started."""

    exit_code = 2
    kind = "bad input"


class PreflightError(NicbenchError):
    """The hosts are not ready: a tool is missing, a port is taken, no privileges."""

    exit_code = 3
    kind = "preflight"


class LabError(NicbenchError):
    """Building, inspecting or removing the embedded lab failed."""

    exit_code = 4
    kind = "lab"


class ToolError(NicbenchError):
    """A traffic tool failed at run time or printed output we cannot trust."""

    exit_code = 5
    kind = "tool"


class StoreError(NicbenchError):
    """The result store is missing, unreadable or from an unknown schema."""

    exit_code = 6
    kind = "store"


class PointsFailed(NicbenchError):
    """The run finished, results are stored, but some points failed."""

    exit_code = 7
    kind = "run"


class Regression(NicbenchError):
    """``nicbench trend --check``: the latest run fell outside the spread of the runs before it
    (``--point``), or a point of a plan is at a regressed level since a recent change point (``--plan``)."""

    exit_code = 8
    kind = "regression"


class NotBetter(NicbenchError):
    """``nicbench ab``: B did not win -- no difference at the A/B's confidence,
    worse somewhere, or not tested; both runs and the judgement are stored."""

    exit_code = 9
    kind = "not-better"


class Interrupted(NicbenchError):
    """The user interrupted (Ctrl-C / SIGTERM); finished points are kept."""

    exit_code = 130
    kind = "interrupted"


class Stopped(KeyboardInterrupt):
    """A stop signal (SIGINT, SIGTERM, SIGHUP) sent down the Ctrl-C path;
    ``signum`` says which, so what stopped a run is said as it was."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


_STOPPED_BY = {signal.SIGINT: "interrupted by the user", signal.SIGTERM: "terminated by SIGTERM",
               signal.SIGHUP: "stopped by SIGHUP (its terminal or session closed)"}


def stopped_by(e: BaseException | None) -> str:
    """What stopped the run, in words, from the KeyboardInterrupt that did
    (a bare one is Ctrl-C)."""
    signum = e.signum if isinstance(e, Stopped) else signal.SIGINT
    return _STOPPED_BY.get(signal.Signals(signum), f"stopped by {signal.Signals(signum).name}")


def visible(text: str) -> str:
    """``text`` with what a terminal would act on instead of show made
    visible as escapes: control characters (ESC sequences, BEL, CR, NUL),
    Unicode format characters (bidi overrides such as U+202E, which reorder
    the rest of the line; zero-width ones) and unpaired surrogates.  Errors
    echo file names, plan values and tools' output that nicbench does not
    control; what is printed must be what is there."""
    return "".join(_escaped(ch) if unicodedata.category(ch) in ("Cc", "Cf", "Cs") else ch for ch in text)


def _escaped(ch: str) -> str:
    o = ord(ch)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def tail(text: str | bytes | None, lines: int = 3, width: int = 300) -> str:
    """The last non-empty lines of a tool's stderr, joined for a one-line message."""
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    kept = [ln.strip() for ln in text.strip().splitlines() if ln.strip()][-lines:]
    joined = " | ".join(kept)
    return joined[-width:]
