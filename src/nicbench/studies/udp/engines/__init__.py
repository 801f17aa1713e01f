"""The UDP study's engines, one file each behind :class:`.base.UdpEngine`.

Adding an engine: a file here and a line in :data:`ENGINES` (and the word in
the plan schema's engine choices, ``plan/studies/udp.py``).
"""

from __future__ import annotations

from .base import UdpEngine
from .iperf2 import Iperf2
from .iperf3 import Iperf3
from .nbperf import Nbperf

ENGINES: dict[str, UdpEngine] = {"iperf3": Iperf3(), "iperf2": Iperf2(), "nbperf": Nbperf()}
