"""Real benchmarks through the kernel: ``forethought bench bfcl`` (BFCL v4 multi-turn, on bfcl-eval's own
tool classes and checker). docs/bfcl.md says what it runs, how it scores and what the ceiling mode measures."""
