"""Every study's plan schema, and the ``[study]`` union pydantic validates against.

This is the one list of study schemas; ``nicbench.registry`` pairs each
kind with its runner and its view (a test checks that both list the same kinds).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Union

from pydantic import Discriminator, Tag

from ..base import StudySchema
from .https import HttpsStudy
from .latency import LatencyStudy
from .packets import PacketStudy
from .storage import StorageStudy
from .tcp import TcpStudy
from .udp import UdpStudy

SCHEMAS: tuple[type[StudySchema], ...] = (TcpStudy, HttpsStudy, StorageStudy, PacketStudy, UdpStudy, LatencyStudy)
DEFAULT_KIND = "tcp"


def _study_kind(v: object) -> str:
    """``kind`` picks the study; a plan without it is a TCP study."""
    if isinstance(v, dict):
        return str(v.get("kind", DEFAULT_KIND))
    return str(getattr(v, "kind", DEFAULT_KIND))


_KINDS = [s.KIND for s in SCHEMAS]
if TYPE_CHECKING:       # for the type checker, any study's schema: code that needs one narrows with isinstance
    Study = StudySchema
else:
    Study = Annotated[
        Union[tuple(Annotated[s, Tag(s.KIND)] for s in SCHEMAS)],  # noqa: UP007 - a union built from the list
        Discriminator(_study_kind, custom_error_type="study_kind",
                      custom_error_message="study.kind must be " + ", ".join(f'"{k}"' for k in _KINDS[:-1])
                      + f' or "{_KINDS[-1]}"',
                      # what the error formatter needs for "did you mean": the tag's key and its values
                      custom_error_context={"discriminator": "kind",
                                            "expected_tags": ", ".join(f"'{k}'" for k in _KINDS)})]

__all__ = ["SCHEMAS", "HttpsStudy", "LatencyStudy", "PacketStudy", "StorageStudy", "Study", "StudySchema", "TcpStudy",
           "UdpStudy"]
