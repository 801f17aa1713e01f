from .load import load_plan, parse_plan
from .model import Plan

__all__ = ["Plan", "load_plan", "parse_plan"]
