"""How far fp32 logits sit from float64 at the tiny presets (scale 5, 64 positions): ours on
the device, transformers on the CPU and on the device, each against transformers in float64
on the CPU; the worst position. Run on a GPU machine (session 115: tiny-gemma failed its 1e-4
bound on an H200 at 1.05e-4 against transformers on the CPU)."""
import torch
from tilegraph.models import Llama
from tilegraph.models.hf_presets import random_hf_model
from tilegraph.testing import rel_error

TINY = ("tiny-llama3", "tiny-qwen2", "tiny-qwen3", "tiny-mistral", "tiny-phi3", "tiny-granite",
        "tiny-ministral", "tiny-smollm3", "tiny-gemma", "tiny-gemma2", "tiny-gemma3")


def worst(a, b):
    return max(rel_error(a[:, t].cpu().double(), b[:, t]) for t in range(b.shape[1]))


for name in TINY:
    torch.manual_seed(0)
    hf = random_hf_model(name, scale=5.0)
    ids = torch.randint(0, hf.config.vocab_size, (3, 64))
    with torch.no_grad():
        ref64 = hf.to(torch.float64)(ids).logits
        hf_cpu = hf.to(torch.float32)(ids).logits
        ours = Llama.from_hf(hf, dtype=torch.float32, device="cuda")(ids.cuda())
        hf_gpu = hf.cuda()(ids.cuda()).logits
    print(f"{name:15s} ours(gpu) {worst(ours, ref64):.2e}  hf(cpu) {worst(hf_cpu, ref64):.2e}  "
          f"hf(gpu) {worst(hf_gpu, ref64):.2e}  ours-vs-hf(cpu) {worst(ours, hf_cpu.double()):.2e}",
          flush=True)
