"""Simulated telecom customer-service domain (tau2-bench telecom style): state, tools, pre/postconditions."""

from .tools import DOMAIN

__all__ = ["DOMAIN"]
