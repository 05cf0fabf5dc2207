"""pytest plugin: keep every Nth collected test from an offset (SHARD=i/N), so N pytest
processes can share one GPU's correctness tests (`-p shard`, this folder on PYTHONPATH);
SHARD=i/N/j/M keeps every Mth of shard i/N's tests from offset j (a shard cut short, again
in M pieces)."""

import os


def pytest_collection_modifyitems(config, items):
    fields = [int(v) for v in os.environ["SHARD"].split("/")]
    kept = items
    for index, count in zip(fields[::2], fields[1::2]):
        kept = [item for i, item in enumerate(kept) if i % count == index]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept
