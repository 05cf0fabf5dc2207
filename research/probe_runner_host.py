"""The host's time a GraphRunner call, where the GPU's work is too small to hide it: one
tiny op (t * 0.5 + 1 on 8 rows) replayed 5000 times, inputs taken three ways: 16 tensors in
turn (the copy nodes re-pointed every call), one tensor again and again, and the runner's
own output fed back (pointed once).

    PYTHONPATH=src python3 research/probe_runner_host.py

Prints us a call measured on the host before and after the final synchronize.
"""

import time

import torch

import tilegraph as tg


def per_call(fn, calls: int = 5000) -> tuple[float, float]:
    for _ in range(200):
        fn(0)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(calls):
        fn(i)
    host = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    return host, (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    torch.manual_seed(0)
    for width in (16, 4096):
        x = torch.randn(8, width, device="cuda")
        runner = tg.GraphRunner(lambda t: t * 0.5 + 1, (x,), sizes=(8,))
        xs = [torch.randn(8, width, device="cuda") for _ in range(16)]
        state = [x]

        def feed(i, runner=runner, state=state):
            state[0] = runner(state[0])

        ways = (("16 tensors in turn", lambda i, r=runner, xs=xs: r(xs[i % 16])),
                ("one tensor", lambda i, r=runner, xs=xs: r(xs[0])), ("output fed back", feed))
        for name, fn in ways:
            for _ in range(2):
                host, total = per_call(fn)
                print(f"width {width}, {name}: host {host:.2f} us a call, with the GPU "
                      f"{total:.2f}", flush=True)


if __name__ == "__main__":
    main()
