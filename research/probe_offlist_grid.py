"""tg.linear against F.linear on projections no issue names (the layers of Llama-3.2-1B,
Qwen2-0.5B and -1.5B, Llama-3-8B, Mistral-7B, an awkward 3000 x 1000) at row counts the
grid skips (3, 6, 12), the way `tilegraph bench decode-grid` times its own shapes (graph
replays over weights rotated past L2, untuned default path): do the rules hold off the list?

    PYTHONPATH=src python3 research/probe_offlist_grid.py [--dtype bf16,fp32] [--rows 1,3,6,12]
        [--shapes 3072x2048,896x4864]
"""

import argparse

import torch

from tilegraph.bench import grid

SHAPES = ((3072, 2048), (16384, 2048), (2048, 8192), (1152, 896), (896, 896), (9728, 896),
          (896, 4864), (17920, 1536), (1536, 8960), (6144, 4096), (28672, 4096), (3000, 1000),
          (1000, 3000), (128256, 2048))
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", default="bf16,fp32")
    parser.add_argument("--rows", default="1,3,6,12")
    parser.add_argument("--shapes", help="N x K pairs (default: SHAPES)")
    args = parser.parse_args()
    rows = [int(r) for r in args.rows.split(",")]
    shapes = (tuple(tuple(int(v) for v in item.split("x")) for item in args.shapes.split(","))
              if args.shapes else SHAPES)
    print(torch.cuda.get_device_name(), flush=True)
    for name in args.dtype.split(","):
        results = grid.run([DTYPES[name]], rows, shapes)
        print(f"\n{name}: speed-up over F.linear (% of floor), us")
        for r in results:
            print(f"{r['n']:>6} x {r['k']:<5} {r['rows']:>2} rows  {r['tilegraph_speedup']:.3f}x "
                  f"({r['tilegraph_pct_floor']:.0f}%)  tg {r['tilegraph_us']:.2f}  "
                  f"cuBLAS {r['cublas_us']:.2f}  {r['status']} {r['reason']}", flush=True)
        summary = grid.summary(results)[0]
        print(f"{name}: geomean {summary['tilegraph_geomean']:.3f}x, "
              f"{summary['tilegraph_slower']} of {summary['points']} slower", flush=True)


if __name__ == "__main__":
    main()
