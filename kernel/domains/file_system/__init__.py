"""Simulated file system domain (state model, tools, pre/postconditions)."""

from .tools import DOMAIN

__all__ = ["DOMAIN"]
