"""Triton kernels, one module per op: kernel, launcher, custom-op registration, reference.

`tilegraph.kernels.<op>` is the module; the public functions come from `tilegraph` (tg.<op>),
and each module's `<op>_ref` is its PyTorch reference.
"""
