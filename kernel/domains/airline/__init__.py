"""Simulated airline customer-service domain (tau2-bench airline style): state, tools, pre/postconditions."""

from .tools import DOMAIN

__all__ = ["DOMAIN"]
