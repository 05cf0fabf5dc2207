"""A spy on a Triton kernel's launches, for tests that check what a launcher asks for."""


def record_launches(monkeypatch, module, name: str, key: str) -> list:
    """Replace module.<name>, a Triton kernel launched as kernel[grid](...), with one that
    notes each launch's keyword `key` (None where absent) and then launches it; the notes."""
    launched = []
    kernel = getattr(module, name)

    class Spy:
        def __getitem__(self, grid):
            def run(*args, **kwargs):
                launched.append(kwargs.get(key))
                return kernel[grid](*args, **kwargs)
            return run

    monkeypatch.setattr(module, name, Spy())
    return launched
