"""Triton's interpreter (TRITON_INTERPRET=1, the tests' path on machines without CUDA) made
cheaper where it repeats work, with its results unchanged: for the test suite's time only.

The interpreter patches triton.language's builtins before a kernel's grid runs and undoes it
after. It also patches them again at every call of a @triton.jit helper inside the kernel
(tl.sum and tl.zeros are helpers too), although the modules are patched already: each
repeat lists the modules' members (inspect.getmembers) and finds nothing left to patch.
A Generator test (test_greedy_tokens_equal_hf_per_family[tiny-phi]) took 15.4 s with the
repeats, 11.1 s without (session 125)."""

from __future__ import annotations


def skip_repeated_patching() -> bool:
    """A helper's call inside a running kernel skips the patching where its modules are
    patched already in this run; anything else patches as before. False where this Triton's
    interpreter lacks the functions wrapped (then nothing changes)."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return False
    executor = getattr(interpreter, "GridExecutor", None)
    patch = getattr(interpreter, "_patch_lang", None)
    if executor is None or patch is None or not hasattr(interpreter, "_LangPatchScope"):
        return False
    grid_call = executor.__call__
    if getattr(patch, "_tilegraph_once", False):
        return True
    running = []   # (kernel function, the ids of its language modules), innermost last

    def languages(fn):
        return {id(value) for value in fn.__globals__.values()
                if value is tl or value is tl.core}

    def patch_once(fn):
        if not running or fn is running[-1][0]:
            return patch(fn)   # a kernel's own patching, undone after its grid
        modules = languages(fn)
        if modules <= running[-1][1]:
            return interpreter._LangPatchScope()   # nothing patched, nothing to undo
        # a helper that sees a module the kernel does not (Triton's own tl.sum sees
        # tl.core): patched here and, as the interpreter leaves a helper's patching, not
        # undone, so not again while this kernel runs
        running[-1][1].update(modules)
        return patch(fn)

    def run_grid(self, *args, **kwargs):
        running.append((self.fn, languages(self.fn)))
        try:
            return grid_call(self, *args, **kwargs)
        finally:
            running.pop()

    patch_once._tilegraph_once = True
    interpreter._patch_lang = patch_once
    interpreter.GridExecutor.__call__ = run_grid
    return True
