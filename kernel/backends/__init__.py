"""Model backends for the kernel's SLM primitives: oracle, hf (transformers + peft), openai."""

from .oracle import OracleBackend

__all__ = ["OracleBackend"]
