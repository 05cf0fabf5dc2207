import os

import pytest
import torch
from hypothesis import settings

import tilegraph  # noqa: F401  (sets TRITON_INTERPRET on machines without CUDA)

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    from _interpreter import skip_repeated_patching

    skip_repeated_patching()

# Property tests draw the same examples on every run ("derandomize"), so a red CI run can be
# replayed exactly; a failure prints the example that failed. HYPOTHESIS_PROFILE=explore
# draws fresh random examples, for hunting new failures by hand.
settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
settings.register_profile("explore", print_blob=True, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config, items):
    _skip_families_transformers_lacks(items)
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _skip_families_transformers_lacks(items):
    """A test of a named model shape (or multimodal wrapper) whose family the installed
    transformers does not know (an older one, as the GPU machine's may be) is skipped with
    that said, rather than failing on transformers' own "unrecognized model" error."""
    try:
        import transformers
        from transformers import CONFIG_MAPPING
    except ImportError:
        return
    from _multimodal import WRAPPED
    from tilegraph.models.hf_presets import SHAPES

    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        for value in params.values():
            if not isinstance(value, str):
                continue
            kind = SHAPES[value]["model_type"] if value in SHAPES else (
                value if value in WRAPPED else None)
            if kind is not None and kind not in CONFIG_MAPPING:
                item.add_marker(pytest.mark.skip(
                    reason=f"transformers {transformers.__version__} has no {kind!r} models"))


@pytest.fixture
def device():
    """Where CPU-sized tests run: the GPU if there is one, else the interpreter on CPU."""
    return "cuda" if HAS_CUDA else "cpu"


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(1234)


@pytest.fixture(autouse=True)
def _private_tune_cache(tmp_path, monkeypatch):
    """Tests never read or write the user's autotune cache, and take default configs: they
    check correctness; timing candidates belongs to benchmarks."""
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILEGRAPH_AUTOTUNE", "0")
