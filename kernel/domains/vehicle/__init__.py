"""Simulated vehicle domain (state model, tools, prerequisites, postconditions)."""

from .tools import DOMAIN

__all__ = ["DOMAIN"]
