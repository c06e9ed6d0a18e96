"""Simulated retail customer-service domain (tau2-bench retail style): state, tools, pre/postconditions."""

from .tools import DOMAIN

__all__ = ["DOMAIN"]
