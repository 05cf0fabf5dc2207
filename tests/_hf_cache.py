"""transformers' decode through its own cache, under the names the installed version uses."""

import inspect


def hf_next(hf, ids, out):
    """hf's output for ids decoded after `out` (an earlier output with use_cache=True),
    through out's cache: transformers 5.24 renamed the keyword and the output field
    past_key_values to cache (the GPU machine's 5.17 has the old name)."""
    cache = out.cache if hasattr(out, "cache") else out.past_key_values
    keyword = ("cache" if "cache" in inspect.signature(hf.forward).parameters
               else "past_key_values")
    return hf(ids, use_cache=True, **{keyword: cache})
