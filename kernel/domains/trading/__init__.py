"""Simulated trading domain (BFCL TradingBot style): state model, tools, pre/postconditions."""

from .tools import DOMAIN

__all__ = ["DOMAIN"]
