"""Loading what training wrote: the bundle format and the base model, tokenizer and adapters in it.

Both the kernel (its ``hf`` backend serves a bundle) and the trainer (``forethought package``
writes one; ``train`` and ``validate`` load the base and adapters) use this layer, so it sits
below both: it imports only ``forethought.errors`` and third-party libraries, never the kernel or
training (tests/test_package_layout.py checks the import graph). What a bundle is checked against
that belongs to the kernel, each primitive's current spec hash, is passed in by the caller.

- :mod:`forethought.bundle.manifest`: the bundle layout, its manifest schema and :func:`load_bundle`.
- :mod:`forethought.bundle.models`: loading a saved base model and tokenizer, and checking that a
  saved adapter lies inside the language model.
"""
