"""nicbench: how close does a Linux host and its NIC get to line rate?

Data flows one way: plan -> hosts/lab -> tools -> run => records => store ->
analysis -> report.  ``records`` is the only module both sides share; only the
CLI joins them.
"""

__version__ = "0.1.0"
