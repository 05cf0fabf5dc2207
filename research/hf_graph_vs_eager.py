"""Is transformers' hand-captured decode graph (the demo's hf-graph peer) the same as its
eager step? Teacher-forced logits of both, and of eager run twice, per step
(results/2026-11-23-session24/hf-graph-vs-eager.txt): at batch 2-4 eager differs from itself
by about 1e-2 between two identical runs, so a peer check can fail by chance at flat logits.

    PYTHONPATH=src python3 research/hf_graph_vs_eager.py
"""
import sys
import torch
from tilegraph import model_demo as md
from tilegraph.models.hf_presets import random_hf_model
from tilegraph.testing import rel_error

for name, batch in [("qwen2-0.5b", 4), ("qwen2-0.5b", 1), ("qwen2-0.5b", 2), ("tinyllama", 4)]:
    hf = random_hf_model(name, dtype=torch.bfloat16, device="cuda", seed=0)
    g = torch.Generator().manual_seed(batch)
    prompts = torch.randint(0, hf.config.vocab_size, (batch, 128), generator=g).cuda()
    cont = torch.randint(0, hf.config.vocab_size, (batch, 12), generator=g).cuda()
    eager = md.HFDecoder(hf, batch, 2048)
    e = eager.score(prompts, cont, eager.step)
    graph = md.HFDecoder(hf, batch, 2048)
    step = md._hand_graph(graph, prompts)
    gl = graph.score(prompts, cont, step)
    e2 = eager.score(prompts, cont, eager.step)
    print(name, batch, "graph vs eager per step:",
          " ".join(f"{rel_error(gl[:, t], e[:, t]):.1e}" for t in range(e.shape[1])))
    print(name, batch, "eager vs eager again:",
          " ".join(f"{rel_error(e2[:, t], e[:, t]):.1e}" for t in range(e.shape[1])))
    # per row at the worst step
    t = max(range(e.shape[1]), key=lambda t: rel_error(gl[:, t], e[:, t]))
    print("   worst step", t, "per row:", [f"{rel_error(gl[r, t], e[r, t]):.1e}" for r in range(batch)])
    sys.stdout.flush()
    del hf, eager, graph, step
    torch.cuda.empty_cache()
