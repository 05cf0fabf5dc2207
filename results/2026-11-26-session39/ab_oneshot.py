"""Temporary: the all-reduce choice's timings (NCCL vs one-shot, us a call in a graph) on 2 GPUs."""
import sys

sys.path.insert(0, "tests")


def target():
    import torch

    from tilegraph import dist as tgd
    from tilegraph.dist.allreduce import LayerAllReduce
    tp = tgd.init(timeout=60)
    out = {}
    for dim, rows in ((2048, 16), (2048, 1), (4096, 8)):
        reduce = LayerAllReduce(tp, dim, torch.bfloat16, torch.device("cuda"), rows=rows)
        out[f"{dim}x{rows}"] = {k: round(v, 2) if isinstance(v, float) else v
                                for k, v in reduce.times_us.items()}
    return out


if __name__ == "__main__":
    from _ranks import run_ranks
    print(sys.argv[1], run_ranks(2, target, timeout=120)[0], flush=True)
