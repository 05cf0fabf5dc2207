"""Exploration (not a deliverable): launch configs of the row kernels (RMSNorm bf16, softmax
fp32) and of GELU at the PERF.md sizes, beside the peers and a plain copy of the same bytes.

    PYTHONPATH=src python3 benchmarks/explore_rows.py [rounds] [case ...] [--quick] [--graph]
    PYTHONPATH=src python3 benchmarks/explore_rows.py harness | hold | flush [order]
    PYTHONPATH=src python3 benchmarks/explore_rows.py rotated [rounds] [--wide] | rms_sizes

Cases: see CASES (rms4096, softmax4096, gelu, gelu_bf16, placement_*, bench_*, ...); --quick
times only the rules' configs beside the peers; --graph times replays of a CUDA graph of many
calls on one x, with no flush (this flatters: L2 keeps part of x between calls, so even a copy
reads 102% of the ceiling; rotated does it right). harness and hold look for the cause of the
bench's slower row-kernel times (notes/kernels.md, session 7); flush times them under four ways
of keeping the input out of L2 (see flush()); rotated and rms_sizes time the row-kernel configs
and cache hints as the bench now does (graph replays cycling through copies of x past 3x L2).

Every variant is timed once a round with bench.measure (L2 flushed before each call), rounds
interleaved so that drift hits all variants alike; the table gives the median over rounds.
"copy" is out.copy_(x) on the same bytes under the same flush: the fastest a kernel that reads
x and writes y once can be at this size, as opposed to the 1 GiB copy ceiling.
Row-kernel configs: BLOCK_M rows x BLOCK_N columns a program x warps; "two-pass" reads each
row in chunks twice (sum, then scale; the second read mostly from L2).
"""

import statistics
import sys

import torch
import torch.nn.functional as F
import triton

from tilegraph import kernels as K
from tilegraph.bench import ceilings, measure
from tilegraph.bench.suite import gelu_tanh_formula, rms_norm_formula, softmax_formula
from tilegraph.kernels import _launch
from tilegraph.testing import rel_error

rms_norm_mod = sys.modules["tilegraph.kernels.rms_norm"]
softmax_mod = sys.modules["tilegraph.kernels.softmax"]
gelu_mod = sys.modules["tilegraph.kernels.gelu"]

def _row_configs(n_cols: int, element_size: int) -> list[dict]:
    rule = _launch.row_config(8192, n_cols, element_size)
    configs = [rule]
    for tile_bytes in (8192, 16384, 32768):
        block_m = max(1, tile_bytes // (n_cols * element_size))
        for warps in (4, 8, 16):
            config = {**rule, "BLOCK_M": block_m, "num_warps": warps}
            if 8 <= block_m * n_cols // (32 * warps) <= 64 and config not in configs:
                configs.append(config)  # 8 to 64 elements a thread
    for chunk in (1024, 2048, 4096):  # two passes, the second re-reading the row from L2
        for warps in (4, 8, 16):
            if chunk < n_cols and 4 <= chunk // (32 * warps) <= 32:
                configs.append({**rule, "BLOCK_M": 1, "BLOCK_N": chunk,
                                "SINGLE_PASS": False, "num_warps": warps})
    return configs


def _label(config: dict) -> str:
    if "BLOCK_SIZE" in config:
        return f"block {config['BLOCK_SIZE']} w{config['num_warps']}"
    passes = "" if config["SINGLE_PASS"] else " two-pass"
    hint = config.get("LOAD_POLICY")
    return (f"{config['BLOCK_M']}x{config['BLOCK_N']} w{config['num_warps']}{passes}"
            + (f" {hint}" if hint else ""))


def rms_norm_case(n_cols: int, quick: bool):
    """quick: the rule only."""
    x = torch.randn(8192, n_cols, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n_cols, device="cuda", dtype=torch.bfloat16)
    out, copy = torch.empty_like(x), torch.empty_like(x)
    compiled = torch.compile(rms_norm_formula, dynamic=False)
    variants = {"copy": lambda: copy.copy_(x), "F.rms_norm": lambda: F.rms_norm(x, (n_cols,), w),
                "torch.compile": lambda: compiled(x, w)}
    variants["tg.rms_norm"] = lambda: K.rms_norm(x, w, out=out)
    for config in _row_configs(n_cols, 2)[:1 if quick else None]:
        variants[_label(config)] = (
            lambda c=config: rms_norm_mod._launch_rms_norm(x, w, 1e-6, out, c))
    reference = K.rms_norm_ref(x.double(), w.double())
    return f"rms_norm bf16 8192x{n_cols}", variants, 2 * x.numel() * 2, (out, reference)


def softmax_case(n_cols: int, quick: bool):
    x = torch.randn(8192, n_cols, device="cuda") * 3
    out, copy = torch.empty_like(x), torch.empty_like(x)
    compiled = torch.compile(softmax_formula, dynamic=False)
    variants = {"copy": lambda: copy.copy_(x), "torch.softmax": lambda: torch.softmax(x, -1),
                "torch.compile": lambda: compiled(x), "tg.softmax": lambda: K.softmax(x, out=out)}
    for config in _row_configs(n_cols, 4)[:1 if quick else None]:
        variants[_label(config)] = lambda c=config: softmax_mod._launch_softmax(x, 1, out, c)
    return f"softmax fp32 8192x{n_cols}", variants, 2 * x.numel() * 4, (out, K.softmax_ref(
        x.double()))


def gelu_case(quick: bool, dtype=torch.float32):
    n = 2**26
    x = torch.randn(n, device="cuda", dtype=dtype) * 3
    out, copy = torch.empty_like(x), torch.empty_like(x)
    compiled = torch.compile(gelu_tanh_formula, dynamic=False)
    variants = {"copy": lambda: copy.copy_(x),
                "F.gelu": lambda: F.gelu(x, approximate="tanh"),
                "torch.compile": lambda: compiled(x)}
    block, warps = _launch.elementwise_shape(n, x.element_size())
    shapes = [(block, warps)] + [(b, w) for b in (512, 1024, 2048, 4096, 8192)
                                 for w in (2, 4, 8, 16)
                                 if 2 <= b // (32 * w) <= 64 and (b, w) != (block, warps)]
    for b, w in shapes[:1] if quick else shapes:
        variants[_label({"BLOCK_SIZE": b, "num_warps": w})] = (
            lambda b=b, w=w: gelu_mod._gelu_kernel[(triton.cdiv(n, b),)](
                out, x, n, ACTIVATION="gelu_tanh", BLOCK_SIZE=b, num_warps=w))
    variants["tg.gelu"] = lambda: K.gelu(x, out=out)
    return f"gelu {dtype} 64M", variants, 2 * n * x.element_size(), (out, K.gelu_ref(x.double()))


def placement_case(kind: str):
    """Is a kernel's time a matter of where `out` lies relative to x? The kernel and a copy
    with out at several byte offsets after x in one allocation, and the bench's own setup."""
    from tilegraph.bench import suite

    dtype, n_cols = (torch.float32, 4096) if kind == "softmax" else (torch.bfloat16, 4096)
    numel = 8192 * n_cols
    es = torch.empty((), dtype=dtype).element_size()
    offsets = (0, 512, 4096, 65536, 2**20, 2**21 + 4096, 7 * 2**20 + 2560)
    big = torch.empty(2 * numel + max(offsets) // es, device="cuda", dtype=dtype)
    x = big[:numel].view(8192, n_cols)
    x.copy_(torch.randn(8192, n_cols, device="cuda") * 3)
    w = torch.randn(n_cols, device="cuda", dtype=dtype)
    variants = {}
    for offset in offsets:
        start = numel + offset // es
        out = big[start:start + numel].view(8192, n_cols)
        if kind == "softmax":
            variants[f"tilegraph, out at x + {numel * es + offset}"] = (
                lambda out=out: K.softmax(x, out=out))
        else:
            variants[f"tilegraph, out at x + {numel * es + offset}"] = (
                lambda out=out: K.rms_norm(x, w, out=out))
        variants[f"copy, out at x + {numel * es + offset}"] = lambda out=out: out.copy_(x)
    case = (suite._softmax if kind == "softmax" else suite._rms_norm)(n_cols, dtype, "cuda")
    bench_out = case.variants["tilegraph"](*case.args)
    distance = bench_out.data_ptr() - case.args[0].data_ptr()
    variants[f"tilegraph, bench's setup (out at x + {distance})"] = (
        lambda: case.variants["tilegraph"](*case.args))
    variants["torch.compile, bench's setup"] = lambda: case.variants["torch.compile"](*case.args)
    return f"{kind} {dtype} 8192x{n_cols}: placement", variants, 2 * numel * es, None


def bench_setup_case(kind: str, quick: bool):
    """The row-kernel configs on the tensors `tilegraph bench` builds (suite.py), beside its
    peers, a copy of the same bytes, and tilegraph writing a fresh output every call."""
    from tilegraph.bench import suite

    build, dtype = ((suite._softmax, torch.float32) if kind == "softmax"
                    else (suite._rms_norm, torch.bfloat16))
    case = build(4096, dtype, "cuda")
    out = case.variants["tilegraph"](*case.args)
    x = case.args[0]
    copy = torch.empty_like(x)
    variants = {name: (lambda f=case.variants[name]: f(*case.args))
                for name in ("torch.compile", "tilegraph")}
    variants["copy"] = lambda: copy.copy_(x)
    if kind == "softmax":
        variants["tilegraph, fresh out"] = lambda: K.softmax(x)
        for config in _row_configs(4096, 4)[:1 if quick else None]:
            variants[_label(config)] = lambda c=config: softmax_mod._launch_softmax(x, 1, out, c)
        reference = K.softmax_ref(x.double())
    else:
        w = case.args[1]
        variants["tilegraph, fresh out"] = lambda: K.rms_norm(x, w)
        for config in _row_configs(4096, 2)[:1 if quick else None]:
            variants[_label(config)] = (
                lambda c=config: rms_norm_mod._launch_rms_norm(x, w, 1e-6, out, c))
        reference = K.rms_norm_ref(x.double(), w.double())
    return (f"{kind} {dtype} 8192x4096 on the bench's tensors", variants,
            2 * x.numel() * x.element_size(), (out, reference))


CASES = {"rms1024": lambda q: rms_norm_case(1024, q), "rms4096": lambda q: rms_norm_case(4096, q),
         "rms16384": lambda q: rms_norm_case(16384, q),
         "softmax4096": lambda q: softmax_case(4096, q),
         "softmax16384": lambda q: softmax_case(16384, q), "gelu": gelu_case,
         "gelu_bf16": lambda q: gelu_case(q, torch.bfloat16),
         "placement_softmax": lambda q: placement_case("softmax"),
         "placement_rms": lambda q: placement_case("rms_norm"),
         "bench_softmax": lambda q: bench_setup_case("softmax", q),
         "bench_rms": lambda q: bench_setup_case("rms_norm", q)}


def run(name: str, rounds: int, quick: bool, graph: bool = False) -> None:
    title, variants, n_bytes, check = CASES[name](quick)
    copy_gbps = ceilings()["copy_gbps"]
    errors = {}
    for label, fn in list(variants.items()):
        try:
            if check is not None:
                check[0].fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            if check is not None and label != "copy" and not label.startswith(
                    ("F.", "torch", "tilegraph, fresh")):
                errors[label] = rel_error(*check)
        except Exception as e:  # a config the GPU refuses: say so and go on
            print(f"  {label}: {type(e).__name__} {str(e)[:100]}", flush=True)
            del variants[label]
    times = {label: [] for label in variants}
    for _ in range(rounds):
        for label, fn in variants.items():
            times[label].append(measure(fn, warmup_ms=10, rep_ms=40, graph=graph,
                                        flush_l2=not graph).median * 1e3)
    us = {label: statistics.median(t) for label, t in times.items()}
    print(f"\n{torch.cuda.get_device_name()} {title}: {n_bytes / 2**20:.0f} MiB moved, "
          f"{rounds} rounds{', graph replays' if graph else ''}; copy ceiling "
          f"{copy_gbps:.0f} GB/s (1 GiB); fastest first", flush=True)
    copy_here = us.get("copy", min(us.values()))
    for label in sorted(us, key=us.get):
        gbps = n_bytes / us[label] * 1e-3
        spread = max(times[label]) - min(times[label])
        err = f"err {errors[label]:.1e}" if label in errors else ""
        print(f"  {us[label]:8.2f} us +-{spread / 2:5.2f} {gbps:6.0f} GB/s {gbps / copy_gbps:6.1%}"
              f"  {copy_here / us[label]:6.1%} of copy here  {label:34} {err}", flush=True)


def harness() -> None:
    """Why `tilegraph bench` and this script time the same kernel differently: the bench's
    tensors timed with this script's and the bench's measure() settings, through compare()
    (the bench's path), and through compare() under the bench's rich progress bar."""
    from tilegraph.bench import compare, suite
    from tilegraph.cli import _progress

    for build, n, dtype in ((suite._softmax, 4096, torch.float32),
                            (suite._rms_norm, 4096, torch.bfloat16)):
        case = build(n, dtype, "cuda")
        names = ("tilegraph", "torch.compile")
        fns = {name: (lambda f=case.variants[name], a=case.args: f(*a)) for name in names}
        times = {}
        for _ in range(3):
            for settings in ((10, 40), (25, 100)):
                for name, fn in fns.items():
                    us = measure(fn, warmup_ms=settings[0], rep_ms=settings[1]).median * 1e3
                    times.setdefault((name, settings), []).append(us)
        print(f"\n{torch.cuda.get_device_name()} {case.shape} {dtype}: measure() medians, us")
        for (name, settings), t in times.items():
            print(f"  {name:14} warmup/rep {settings} ms: {[round(v, 2) for v in t]}")
        for label, bar in (("compare()", False), ("compare() under a progress bar", True)):
            chosen = {name: case.variants[name] for name in names}
            if bar:
                with _progress() as progress:
                    task = progress.add_task("bench", total=1)
                    result = compare(chosen, case.reference, case.args, bytes=case.bytes,
                                     progress=lambda what, t=task: progress.update(
                                         t, description=what))
            else:
                result = compare(chosen, case.reference, case.args, bytes=case.bytes)
            print(f"  {label}: " + ", ".join(
                f"{name} {result[name].stats.median * 1e3:.2f} us" for name in names))


def hold() -> None:
    """Does the GPU's idle time between the L2 flush and the kernel change the kernel's time?
    The bench's tensors, the flush, then a spin of `hold` us, then the kernel (CUDA events)."""
    from tilegraph.bench import suite, timing

    for build, n, dtype in ((suite._softmax, 4096, torch.float32),
                            (suite._rms_norm, 4096, torch.bfloat16)):
        case = build(n, dtype, "cuda")
        copy = torch.empty_like(case.args[0])
        fns = {name: (lambda f=case.variants[name], a=case.args: f(*a))
               for name in ("tilegraph", "torch.compile")}
        fns["copy"] = lambda c=copy, x=case.args[0]: c.copy_(x)
        flusher = timing._L2Flusher()
        print(f"\n{torch.cuda.get_device_name()} {case.shape} {dtype}: median us after a hold "
              f"of 0 / 25 / 50 / 100 / 200 / 500 / 1000 us; host issue time", flush=True)
        for name, fn in fns.items():
            fn()
            host = timing._host_us(fn)
            row = []
            for hold_us in (0, 25, 50, 100, 200, 500, 1000):
                timing._time_events(fn, 50, flusher, max(hold_us, 2 * host))  # warm-up
                t = timing._time_events(fn, 300, flusher, max(hold_us, 2 * host))
                row.append(statistics.median(t) * 1e3)
            print(f"  {name:14} " + " ".join(f"{v:7.2f}" for v in row) +
                  f"   host {host:.1f} us", flush=True)


def flush(order: str = "tilegraph-first") -> None:
    """Is the row kernels' state-dependent time a matter of how L2 is flushed? The bench's
    tensors timed (a) after zeroing a 2x L2 buffer (measure()'s flush: leaves L2 full of dirty
    lines that the kernel must write back), (b) after reading such a buffer (clean lines),
    (c) back to back with no flush (the working set is over 2x L2; how the copy ceiling is
    timed), (d) as graph replays cycling through input copies past 3x L2 (QuACK's method).
    Each (variant, method) twice, in the order given, in one process."""
    from tilegraph.bench import suite, timing
    from tilegraph.bench.compare import _cycling, _rotated_args

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    dirty = timing._L2Flusher()
    clean_buffer = torch.ones(2 * l2 // 4, dtype=torch.int32, device="cuda")
    for build, n, dtype in ((suite._rms_norm, 4096, torch.bfloat16),
                            (suite._softmax, 4096, torch.float32)):
        case = build(n, dtype, "cuda")
        x = case.args[0]
        copy = torch.empty_like(x)
        names = ["tilegraph", "torch.compile"]
        if order != "tilegraph-first":
            names.reverse()
        fns = {name: case.variants[name] for name in names}
        fns["copy"] = lambda x, *rest, c=copy: c.copy_(x)
        n_bytes = case.bytes

        def events(fn, before):
            fn()
            hold = 2 * timing._host_us(fn)
            timing._time_events(fn, 50, before, hold)
            return statistics.median(timing._time_events(fn, 400, before, hold)) * 1e3

        methods = {
            "zeroed 2xL2 (bench)": lambda fn: events(fn, dirty),
            "read 2xL2": lambda fn: events(fn, lambda: clean_buffer.sum()),
            "no flush": lambda fn: events(fn, None),
            "graph, rotated 3xL2": lambda fn: measure(fn, flush_l2=False, graph=True,
                                                      rep_ms=100).median * 1e3,
        }
        arg_sets = _rotated_args(case.args, (0,))
        print(f"\n{torch.cuda.get_device_name()} {case.shape} {dtype} ({order}): median us, "
              f"% of the copy ceiling ({ceilings()['copy_gbps']:.0f} GB/s), two passes",
              flush=True)
        for name, fn in fns.items():
            for method, timer in methods.items():
                target = _cycling(fn, arg_sets if method.startswith("graph")
                                  else [tuple(case.args)])
                us = [timer(target) for _ in range(2)]
                pct = [n_bytes / u * 1e-3 / ceilings()["copy_gbps"] for u in us]
                print(f"  {name:14} {method:22} {us[0]:7.2f} {us[1]:7.2f} us "
                      f"({pct[0]:6.1%} {pct[1]:6.1%})", flush=True)


HINTS = ["", "evict_first", "evict_last"]  # x loads; streaming (.cs) stores gave no steady gain


def _inductor_configs() -> list[str]:
    """The launch configs torch.compile's Triton kernels settled on in this process."""
    from torch._inductor.codecache import PyCodeCache

    modules = PyCodeCache.modules
    found = []
    for module in (modules.values() if isinstance(modules, dict) else modules):
        for name, value in vars(module).items():
            for launcher in getattr(value, "launchers", None) or []:
                found.append(f"{name}: {launcher.config}")
    return found


def rms_sizes(rounds: int = 2) -> None:
    """RMSNorm bf16 at 1024-16384 columns: every tile of 4-32 KB with 8-32 elements a thread,
    with and without evict-last loads, all listed (graph replays over rotated copies)."""
    for n_cols in (1024, 2048, 4096, 8192, 16384):
        _rotated_kind("rms_norm", n_cols, rounds, wide=True, top=100)
    print("\ntorch.compile's kernels:", *_inductor_configs(), sep="\n  ")


def rotated(rounds: int = 2, wide: bool = False) -> None:
    """Row-kernel configs and cache hints beside the peers, timed like `tilegraph bench`:
    graph replays cycling through copies of x spanning 3x L2, rounds interleaved.
    wide: tiles of 2-64 KB and 1-32 warps, with and without evict-last loads."""
    for kind in ("softmax", "rms_norm"):
        for n_cols in (1024, 4096, 16384):
            _rotated_kind(kind, n_cols, rounds, wide)
    print("\ntorch.compile's kernels:", *_inductor_configs(), sep="\n  ")


def _wide_configs(n_cols: int, element_size: int, low: int = 4, high: int = 64) -> list[dict]:
    rule = _launch.row_config(8192, n_cols, element_size)
    configs = []
    for tile_bytes in (2048, 4096, 8192, 16384, 32768, 65536):
        block_m = tile_bytes // (n_cols * element_size)
        for warps in (1, 2, 4, 8, 16, 32):
            if block_m >= 1 and low <= block_m * n_cols // (32 * warps) <= high:
                configs += [{**rule, "BLOCK_M": block_m, "num_warps": warps, "LOAD_POLICY": p}
                            for p in ("", "evict_last")]
    return configs


def _rotated_kind(kind: str, n_cols: int, rounds: int, wide: bool = False,
                  top: int = 12) -> None:
    from tilegraph.bench.compare import _cycling, _rotated_args

    copy_gbps = ceilings()["copy_gbps"]
    dtype = torch.float32 if kind == "softmax" else torch.bfloat16
    x = (torch.randn(8192, n_cols, device="cuda") * 3).to(dtype)
    w = torch.randn(n_cols, device="cuda", dtype=dtype)
    out, copy = torch.empty_like(x), torch.empty_like(x)
    variants = {"copy": lambda x: copy.copy_(x)}
    singles = [c for c in _row_configs(n_cols, x.element_size()) if c["SINGLE_PASS"]]
    configs = [{**c, "LOAD_POLICY": load} for c in singles[:3] for load in HINTS]
    if wide:
        configs = [singles[0]] + [c for c in _wide_configs(n_cols, x.element_size(), *(
            (8, 32) if top > 12 else ())) if c != singles[0]]
    if kind == "softmax":
        compiled = torch.compile(softmax_formula, dynamic=False)
        variants["torch.compile"] = compiled
        for config in configs:
            variants[_label(config)] = (
                lambda x, c=config: softmax_mod._launch_softmax(x, 1, out, c))
        reference = K.softmax_ref(x.double())
    else:
        compiled = torch.compile(rms_norm_formula, dynamic=False)
        variants["torch.compile"] = lambda x: compiled(x, w)
        for config in configs:
            variants[_label(config)] = (
                lambda x, c=config: rms_norm_mod._launch_rms_norm(x, w, 1e-6, out, c))
        reference = K.rms_norm_ref(x.double(), w.double())
    errors = {}
    for label, fn in variants.items():
        out.fill_(float("nan"))
        fn(x)
        if label not in ("copy", "torch.compile"):
            errors[label] = rel_error(out, reference)
    arg_sets = _rotated_args((x,))
    times = {label: [] for label in variants}
    for _ in range(rounds):
        for label, fn in variants.items():
            stats = measure(_cycling(fn, arg_sets), warmup_ms=10, rep_ms=40, graph=True,
                            flush_l2=False)
            times[label].append(stats.median * 1e3)
    us = {label: statistics.median(t) for label, t in times.items()}
    n_bytes = 2 * x.numel() * x.element_size()
    print(f"\n{torch.cuda.get_device_name()} {kind} {dtype} 8192x{n_cols}, graph replays over "
          f"{len(arg_sets)} copies of x, {rounds} rounds; % of {copy_gbps:.0f} GB/s", flush=True)
    for label in sorted(us, key=us.get)[:top]:
        spread = max(times[label]) - min(times[label])
        err = f"err {errors[label]:.1e}" if label in errors else ""
        print(f"  {us[label]:8.2f} us +-{spread / 2:5.2f} "
              f"{n_bytes / us[label] * 1e-3 / copy_gbps:6.1%}  {label:40} {err}", flush=True)
    rule_of = _launch.softmax_config if kind == "softmax" else _launch.row_config
    rule = _label(rule_of(8192, n_cols, x.element_size()))  # the config the launcher uses
    print(f"  rule {rule}: {us.get(rule, float('nan')):.2f} us", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["rms_sizes"]:
        sys.exit(rms_sizes())
    if sys.argv[1:2] == ["rotated"]:
        sys.exit(rotated(*(int(a) for a in sys.argv[2:3] if a.isdigit()),
                         wide="--wide" in sys.argv))
    if sys.argv[1:2] == ["flush"]:
        sys.exit(flush(*sys.argv[2:3]))
    if sys.argv[1:] in (["harness"], ["hold"]):
        sys.exit({"harness": harness, "hold": hold}[sys.argv[1]]())
    args = sys.argv[1:]
    rounds = int(args.pop(0)) if args and args[0].isdigit() else 3
    quick, graph = "--quick" in args, "--graph" in args
    names = [a for a in args if not a.startswith("--")] or list(CASES)
    for case in names:
        run(case, rounds, quick, graph)
