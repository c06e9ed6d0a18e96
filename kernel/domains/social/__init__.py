"""Simulated social domain: posting (tweets, follows) and direct messaging, each with its own login."""

from .tools import DOMAIN

__all__ = ["DOMAIN"]
