"""Where a few-pair decode attention call's fixed ~4 us go: %globaltimer at the phases of
every attention and merge program, in a graph of back-to-back calls (the attention grid's
timing), from a copy of src/ patched to stamp them.

    python3 research/attention_timeline.py patch /tmp/stamped/src
    PYTHONPATH=/tmp/stamped/src python3 research/attention_timeline.py run \
        [--shape 28/4x128] [--batch 1] [--context 8192] [--calls 24] [--in-kernel]

Why (research/attention_fixed_cost.py, H200, session 110): few-pair calls stream at 88-100%
of copy past a fixed 3.8-5.9 us a call, where a plain copy of as many bytes costs 1.85 us
beside its bytes; L2 prefetch of whole runs, preloads into registers and a merge releasing
the next call early did not lower it. Stamps:
  attention: start, waited (past griddepcontrol.wait), streamed (its run's softmax and
             weighted sum done: the stamp reads the sum), stored (partials issued)
  merge:     start, waited, done (the stamp after the output's store is issued), its SM
Printed, over the middle calls (medians over calls, the clock ticks in 32 ns or coarser):
the period, then from the call's first attention program past its wait: when the first and
the median program finished streaming, when the last stored its partials, when the merge's
first program passed its wait, when its last finished, and when the next call's first
attention program passed its wait; the merge's SMs.

TG_RELEASE_AT_EXIT=1: attention releases the merge only as its programs exit (no
griddepcontrol.launch_dependents), so the merge's programs are placed as SMs free up rather
than crowded onto the SMs attention left idle.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

NS = '''

@triton.jit
def _ns(anchor):
    """%globaltimer, after `anchor` is known (a 32-bit integer the stamp must follow)."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [anchor],
                                     dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _sm(anchor):
    """The SM the program runs on (%smid)."""
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [anchor],
                                     dtype=tl.int32, is_pure=False, pack=1)
'''

EDITS = [
    ("_LOG2E = tl.constexpr(1.4426950408889634)\n",
     "_LOG2E = tl.constexpr(1.4426950408889634)\n"
     "STAMPS = {'cycle': 1 << 30}  # the launcher's buffers, a call's index modulo cycle\n"),
    ("                             qk_scale, max_seq,\n",
     "                             qk_scale, max_seq, stamp_ptr,\n"),
    ("    run = tl.program_id(1)\n",
     "    run = tl.program_id(1)\n    t_start = _ns(run)\n    t_waited = t_start\n"),
    ("        tl.extra.cuda.gdc_launch_dependents()  # the next kernel may prefetch its weights\n",
     "        if not RELEASE_AT_EXIT:\n"
     "            tl.extra.cuda.gdc_launch_dependents()\n"
     "        t_waited = _ns(run)\n"),
    ("                             RUNS_PRELOADED: tl.constexpr = False):\n",
     "                             RUNS_PRELOADED: tl.constexpr = False,\n"
     "                             RELEASE_AT_EXIT: tl.constexpr = False):\n"),
    ("        scale * math.log2(math.e), max_seq,\n        N_KV_HEADS=n_kv_heads,",
     "        scale * math.log2(math.e), max_seq,\n"
     "        RELEASE_AT_EXIT=os.environ.get('TG_RELEASE_AT_EXIT') == '1',\n"
     "        N_KV_HEADS=n_kv_heads,"),
    ("import functools\n", "import functools\nimport os\n"),
    ("    if run < used:\n        offs_g = tl.arange(0, BLOCK_G)\n",
     "    t_streamed = t_waited\n    t_stored = t_waited\n"
     "    if run < used:\n        offs_g = tl.arange(0, BLOCK_G)\n"),
    ("                                        BLOCK_T, HEAD_DIM == BLOCK_D, DOT_PRECISION, "
     "UPCAST_DOT)\n",
     "                                        BLOCK_T, HEAD_DIM == BLOCK_D, DOT_PRECISION, "
     "UPCAST_DOT)\n"
     "        t_streamed = _ns((tl.sum(denom, axis=0) != 0.5).to(tl.int32))\n"),
    ("                     acc, mask=real[:, None])\n",
     "                     acc, mask=real[:, None])\n            t_stored = _ns(run)\n"),
    ("                    tl.store(count_ptr + unit, 0)  # zero for the next launch on this "
     "stream\n",
     "                    tl.store(count_ptr + unit, 0)  # zero for the next launch on this "
     "stream\n"
     "    stamps = stamp_ptr + (unit * tl.num_programs(1) + run) * 4\n"
     "    tl.store(stamps + 0, t_start)\n    tl.store(stamps + 1, t_waited)\n"
     "    tl.store(stamps + 2, t_streamed)\n    tl.store(stamps + 3, t_stored)\n"),
    ("def _merge_apart_kernel(out_ptr, stride_ob, stride_oh, lengths_ptr, partial_ptr, max_seq,\n",
     "def _merge_apart_kernel(out_ptr, stride_ob, stride_oh, lengths_ptr, partial_ptr, max_seq,\n"
     "                        stamp_ptr,\n"),
    ("    g = tl.program_id(1)\n",
     "    g = tl.program_id(1)\n    m_start = _ns(g)\n    m_waited = m_start\n"),
    ("        tl.extra.cuda.gdc_wait()               # every run's partials are out\n"
     "        tl.extra.cuda.gdc_launch_dependents()\n",
     "        tl.extra.cuda.gdc_wait()               # every run's partials are out\n"
     "        tl.extra.cuda.gdc_launch_dependents()\n        m_waited = _ns(g)\n"),
    ("                 + offs_d, result.to(out_ptr.dtype.element_ty), mask=offs_d < HEAD_DIM)\n",
     "                 + offs_d, result.to(out_ptr.dtype.element_ty), mask=offs_d < HEAD_DIM)\n"
     "    m_stamps = stamp_ptr + (unit * tl.num_programs(1) + g) * 4\n"
     "    tl.store(m_stamps + 0, m_start)\n    tl.store(m_stamps + 1, m_waited)\n"
     "    tl.store(m_stamps + 2, _ns(g))\n"
     "    tl.store(m_stamps + 3, _sm(g).to(tl.int64))\n"),
    # the launcher: a buffer a call, in call order (STAMPS["next"] counts them)
    ("        scale * math.log2(math.e), max_seq,\n",
     "        scale * math.log2(math.e), max_seq, _stamps('attention', grid),\n"),
    ("        merge(out, out.stride(0), out.stride(1), lengths, partials, max_seq,\n",
     "        merge(out, out.stride(0), out.stride(1), lengths, partials, max_seq,\n"
     "              _stamps('merge', grid),\n"),
    ("\n\ndef longest_run_tiles(",
     "\n\ndef _stamps(kind, grid):\n"
     "    n = STAMPS.setdefault(kind + ' next', 0)\n"
     "    STAMPS[kind + ' next'] = n + 1\n"
     "    i = n % STAMPS['cycle']\n"
     "    per = 4\n"
     "    key = (kind, i)\n"
     "    if key not in STAMPS:\n"
     "        STAMPS[key] = torch.zeros(grid[0] * grid[1], per, dtype=torch.int64,\n"
     "                                  device='cuda')\n"
     "    return STAMPS[key]\n\n\ndef longest_run_tiles("),
]


def patch(src: Path) -> None:
    path = src / "tilegraph" / "kernels" / "decode_attention.py"
    text = path.read_text()
    for old, new in EDITS:
        if text.count(old) != 1:
            raise SystemExit(f"expected one {old!r} in {path}, found {text.count(old)}")
        text = text.replace(old, new)
    # _ns before the first kernel that calls it
    first = text.index("@triton.jit\ndef _run_bounds")
    text = text[:first] + NS.lstrip("\n") + "\n\n" + text[first:]
    path.write_text(text)
    print(f"patched {path}")


def run(args) -> None:
    import torch

    from tilegraph.bench.timing import measure
    from tilegraph.kernels import decode_attention as da
    from tilegraph.kernels._launch import sm_count
    from tilegraph.testing import randn

    heads_part, head_dim = args.shape.split("x")
    heads, kv_heads = map(int, heads_part.split("/"))
    head_dim = int(head_dim)
    dtype = torch.bfloat16
    sets = max(2, -(-150 * 2**20 // (4 * args.batch * kv_heads * args.context * head_dim)))
    caches = [(randn(args.batch, kv_heads, args.context, head_dim, dtype=dtype, device="cuda"),
               randn(args.batch, kv_heads, args.context, head_dim, dtype=dtype, device="cuda"))
              for _ in range(sets)]
    q = randn(args.batch, heads, head_dim, dtype=dtype, device="cuda")
    lengths = torch.full((args.batch,), args.context, device="cuda")
    out = torch.empty_like(q)
    config = da.attention_config(args.batch, kv_heads, heads // kv_heads, head_dim,
                                 args.context, sm_count(q.device),
                                 **da.device_facts(dtype, q.device),
                                 merge_apart=not args.in_kernel)

    def chain():
        for i in range(args.calls):
            k, v = caches[i % sets]
            da.launch_decode_attention(q, k, v, lengths, head_dim ** -0.5, out, config)

    # call i of every chain stamps buffer i (made by this first, uncaptured chain), so the
    # buffers hold the last chain the timing's graph replayed
    da.STAMPS["cycle"] = args.calls
    chain()
    torch.cuda.synchronize()
    us = measure(chain, warmup_ms=5, rep_ms=20, graph=True).median * 1e3 / args.calls
    attention = [da.STAMPS[("attention", i)].cpu().double() / 1e3 for i in range(args.calls)]
    merge = ([da.STAMPS[("merge", i)].cpu().double() / 1e3 for i in range(args.calls)]
             if ("merge", 0) in da.STAMPS else None)
    ref_last = da.decode_attention_ref(q.double(), caches[(args.calls - 1) % sets][0].double(),
                                       caches[(args.calls - 1) % sets][1].double(), lengths)
    err = ((out.double() - ref_last).norm() / ref_last.norm()).item()
    print(f"{args.shape} b{args.batch} @{args.context} bf16, "
          f"{'in-kernel merge' if args.in_kernel else 'merged apart'}, "
          f"{attention[0].shape[0]} attention programs a call: {us:.2f} us a call "
          f"(graph replays of {args.calls}); last call's relative error {err:.1e}")
    middle = range(args.calls // 4, 3 * args.calls // 4)
    rows = []
    for i in middle:
        a = attention[i]
        used = a[:, 2] > a[:, 1]        # programs that streamed a run
        t0 = a[:, 1].min().item()       # the first program past its wait
        row = {"started before": t0 - a[:, 0].min().item(),
               "streamed, first": (a[used, 2].min() - t0).item(),
               "streamed, median": (a[used, 2].median() - t0).item(),
               "streamed, last": (a[used, 2].max() - t0).item(),
               "stored, last": (a[used, 3].max() - t0).item(),
               "next call waited": (attention[i + 1][:, 1].min() - t0).item()}
        if merge is not None:
            m = merge[i]
            row["merge waited, first"] = (m[:, 1].min() - t0).item()
            row["merge waited, last"] = (m[:, 1].max() - t0).item()
            row["merge done, first"] = (m[:, 2].min() - t0).item()
            row["merge done, last"] = (m[:, 2].max() - t0).item()
            # stamps in us: the SM ids were divided by 1e3 with them
            sms = torch.round(m[:, 3] * 1e3).long()
            row["merge SMs"] = float(sms.unique().numel())
            row["merge programs, most an SM"] = float(sms.bincount().max())
        rows.append(row)
    period = statistics.median(
        (attention[i + 1][:, 1].min() - attention[i][:, 1].min()).item() for i in middle)
    print(f"  period (first wait to first wait) {period:.2f} us; from the first attention "
          "program past its wait, medians over calls:")
    for key in rows[0]:
        unit = "" if key.startswith("merge SMs") or "an SM" in key else " us"
        print(f"    {key:26s} {statistics.median(r[key] for r in rows):6.2f}{unit}")


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("patch")
    p.add_argument("src", type=Path)
    r = sub.add_parser("run")
    r.add_argument("--shape", default="28/4x128")
    r.add_argument("--batch", type=int, default=1)
    r.add_argument("--context", type=int, default=8192)
    r.add_argument("--calls", type=int, default=24)
    r.add_argument("--in-kernel", action="store_true")
    args = parser.parse_args()
    if args.command == "patch":
        patch(args.src)
    else:
        run(args)


if __name__ == "__main__":
    sys.exit(main())
