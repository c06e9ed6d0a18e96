"""Simulated travel booking domain (BFCL TravelAPI style): state, tools, pre/postconditions."""

from .tools import DOMAIN

__all__ = ["DOMAIN"]
