"""The TCP study's engines, one file each behind :class:`.base.TcpEngine`.

Adding an engine: a file here and a line in :data:`ENGINES` (and the word in
the plan schema's engine choices, ``plan/studies/tcp.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from .base import TcpEngine, TcpHosts
from .iperf2 import Iperf2
from .iperf3 import Iperf3
from .nbperf import Nbperf

ENGINES: dict[str, Callable[[TcpHosts], TcpEngine]] = {"iperf3": Iperf3, "iperf2": Iperf2, "nbperf": Nbperf}
