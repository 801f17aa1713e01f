"""The latency study's probe engines: one file each, one line here.

Adding an engine: a class with the :class:`~.base.ProbeEngine` members in
``engines/<name>.py`` (its argv and parsers in ``tools/``), its line in
``ENGINES``, and its name in the plan's ``Engine``, ``SERVES`` and
``WAITING`` (``plan/studies/latency.py``: which protocols it measures, how
its client waits, its timing and message sizes).
"""

from __future__ import annotations

from .base import ProbeEngine
from .iperf2 import Iperf2
from .irtt import Irtt
from .sockperf import Sockperf

ENGINES: dict[str, ProbeEngine] = {"sockperf": Sockperf(), "irtt": Irtt(), "iperf2": Iperf2()}

__all__ = ["ENGINES", "ProbeEngine"]
