"""`tilegraph demo --model NAME`: a Llama-family model decoding four ways, measured in one run.

    hf-eager     transformers' model over a StaticCache, one forward a token
    hf-graph     that step captured by hand in a torch.cuda.CUDAGraph, one replay a token
    hf-compile   transformers' model under torch.compile(mode="reduce-overhead", fullgraph=True)
    tilegraph    Llama.from_hf(the same weights) in a tg.Generator (sampling inside the graph)

Every variant decodes the same random prompts greedily. Before its time counts, each is
checked against transformers eager: one HF forward over prompt + the variant's own tokens
must rank every token the variant chose first, or within a near-tie of first (2% of the
row's largest logit: implementations may round a tie either way). ms/token is decode time
from the first new token to the last, divided by the steps between them.

transformers' StaticCache appends at an internal counter on every forward (warm-ups and
capture too), so every HF variant resets its cache before it prefills.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from .bench import Unavailable, report
from .generate import Generator
from .models.hf_presets import random_hf_model
from .models.llama import Llama

VARIANTS = ("hf-eager", "hf-graph", "hf-compile", "tilegraph")
NEAR_TIE = 0.02   # of a logits row's largest magnitude


@dataclass
class ModelRun:
    variant: str
    tokens: torch.Tensor | None = None   # (B, new) chosen tokens of the checked run
    ms_per_token: float | None = None
    build_seconds: float | None = None
    status: str = "ok"
    reason: str = ""
    near_ties: int = 0        # tokens that were not HF's argmax but within NEAR_TIE of it


def _synchronize(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


class HFDecoder:
    """transformers' model over a StaticCache, greedy, with its decode step as a function of
    static tensors (ids, position), so it can be captured or compiled."""

    def __init__(self, hf, batch: int, max_seq: int):
        from transformers import StaticCache

        self.hf = hf
        device = hf.device
        self.cache = StaticCache(config=hf.config, max_cache_len=max_seq)
        self.ids = torch.zeros(batch, 1, dtype=torch.int64, device=device)
        self.position = torch.zeros(1, dtype=torch.int64, device=device)
        self.forward = hf.forward

    @torch.no_grad()
    def step(self) -> torch.Tensor:
        out = self.forward(input_ids=self.ids, past_key_values=self.cache,
                           cache_position=self.position, use_cache=True)
        return out.logits[:, -1]

    @torch.no_grad()
    def run(self, prompts: torch.Tensor, new_tokens: int, step: Callable[[], torch.Tensor]
            ) -> tuple[torch.Tensor, float]:
        """Greedy tokens (B, new_tokens) and ms per decode step."""
        self.cache.reset()
        length = prompts.shape[1]
        logits = self.hf(input_ids=prompts, past_key_values=self.cache, use_cache=True,
                         cache_position=torch.arange(length, device=prompts.device)).logits
        out = torch.empty(prompts.shape[0], new_tokens, dtype=torch.int64,
                          device=prompts.device)
        out[:, 0] = logits[:, -1].argmax(-1)
        self.position.fill_(length)
        _synchronize(prompts.device)
        start = time.perf_counter()
        for i in range(1, new_tokens):
            self.ids.copy_(out[:, i - 1:i])
            out[:, i] = step().argmax(-1)
            self.position.add_(1)
        _synchronize(prompts.device)
        return out, 1e3 * (time.perf_counter() - start) / max(new_tokens - 1, 1)


def _hand_graph(decoder: HFDecoder, prompts: torch.Tensor) -> Callable[[], torch.Tensor]:
    """The step captured in a torch.cuda.CUDAGraph the way PyTorch's docs teach it."""
    decoder.run(prompts, 2, decoder.step)   # allocates the cache's tensors
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            decoder.step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        logits = decoder.step()

    def replay() -> torch.Tensor:
        graph.replay()
        return logits
    return replay


def _compiled(decoder: HFDecoder, prompts: torch.Tensor) -> Callable[[], torch.Tensor]:
    torch.compiler.reset()
    decoder.forward = torch.compile(decoder.hf.forward, mode="reduce-overhead", fullgraph=True)
    decoder.run(prompts, 4, decoder.step)   # compile, then record its graphs
    return decoder.step


def check_tokens(hf, prompts: torch.Tensor, tokens: torch.Tensor) -> tuple[str, int, str]:
    """(status, near ties, reason): is every chosen token HF eager's argmax given its prefix,
    or within NEAR_TIE of it?"""
    with torch.no_grad():
        logits = hf(torch.cat([prompts, tokens], dim=1)).logits.float()
    length, new = prompts.shape[1], tokens.shape[1]
    scores = logits[:, length - 1:length - 1 + new]            # (B, new, vocab)
    best = scores.max(dim=-1).values
    chosen = scores.gather(-1, tokens[..., None]).squeeze(-1)
    margin = (best - chosen) / scores.abs().amax(dim=-1)
    near_ties = int(((margin > 0) & (margin <= NEAR_TIE)).sum())
    worst = margin.max().item()
    if worst > NEAR_TIE:
        b, t = divmod(int(margin.argmax()), new)
        return "FAIL", near_ties, (f"row {b} token {t}: HF ranks it {worst:.3f} of the row's "
                                   f"largest logit below its best")
    return "ok", near_ties, ""


Decode = Callable[[], tuple[torch.Tensor, float]]   # () -> (tokens (B, new), ms per step)


def _build_hf(name: str, hf, prompts: torch.Tensor, new_tokens: int, max_seq: int
              ) -> Decode | Unavailable:
    if name != "hf-eager" and not prompts.is_cuda:
        return Unavailable("needs CUDA")
    decoder = HFDecoder(hf, prompts.shape[0], max_seq)
    builders = {"hf-eager": lambda d, p: d.step, "hf-graph": _hand_graph,
                "hf-compile": _compiled}
    step = builders[name](decoder, prompts)
    return lambda: decoder.run(prompts, new_tokens, step)


def _build_tilegraph(model: Llama, prompts: torch.Tensor, new_tokens: int, max_seq: int,
                     sizes, builds: dict) -> Decode:
    """A Generator built twice: `builds` gets both times (cold: Triton compiles the kernels,
    unless its disk cache has them; warm: they are compiled)."""
    generator = None
    for label in ("cold", "warm"):
        generator = None   # the first one's cache freed before the second is made
        _synchronize(model.device)
        start = time.perf_counter()
        generator = Generator(model, max_batch=prompts.shape[0], max_seq=max_seq, sizes=sizes)
        _synchronize(model.device)
        builds[label] = time.perf_counter() - start

    def decode() -> tuple[torch.Tensor, float]:
        ids = generator.generate(prompts, new_tokens)
        return torch.tensor(ids, device=prompts.device), generator.stats.decode_ms_per_token
    return decode


def run(name: str, batch: int, prompt_len: int, new_tokens: int, max_seq: int,
        dtype: torch.dtype, device: str, variants=VARIANTS, sizes=(1, 2, 4, 8),
        progress: Callable[[str], None] = lambda what: None, seed: int = 0) -> dict:
    """Build every variant, then check and time each on the same prompts (built first: a
    torch.compile build makes every later graph launch of the process slower, and no
    variant should be timed before it while another is timed after)."""
    progress(f"{name}: random weights")
    hf = random_hf_model(name, dtype=dtype, device=device, seed=seed)
    model = Llama.from_hf(hf)
    generator = torch.Generator().manual_seed(seed + batch)
    prompts = torch.randint(0, hf.config.vocab_size, (batch, prompt_len),
                            generator=generator).to(device)
    timed = prompts.is_cuda
    built, builds = {}, {}
    for variant in variants:
        progress(f"{name} batch {batch}: building {variant}")
        _synchronize(device)
        start = time.perf_counter()
        if variant == "tilegraph":
            built[variant] = _build_tilegraph(model, prompts, new_tokens, max_seq,
                                              tuple(s for s in sizes if s <= batch), builds)
        else:
            built[variant] = _build_hf(variant, hf, prompts, new_tokens, max_seq)
        _synchronize(device)
        seconds = builds["cold"] if variant == "tilegraph" else time.perf_counter() - start
        built[variant] = (built[variant], seconds)
    runs = []
    for variant, (decode, seconds) in built.items():
        progress(f"{name} batch {batch}: decoding {new_tokens} tokens with {variant}")
        if isinstance(decode, Unavailable):
            runs.append(ModelRun(variant, status="skipped", reason=decode.reason))
            continue
        tokens, ms = decode()
        result = ModelRun(variant, tokens, None, seconds)
        result.status, result.near_ties, result.reason = check_tokens(hf, prompts, tokens)
        if result.status == "ok" and timed:
            result.ms_per_token = decode()[1]   # the checked run warmed it up
        runs.append(result)
    return {"runs": runs, "config": model.config, "builds": builds}


def summarize(name: str, batch: int, runs: list[ModelRun], config, element_size: int,
              context: float, copy_gbps: float | None) -> list[dict]:
    """Rows: ms/token, tokens/s, % of the floor (weights and the KV bytes a step must read
    at the mean context, over measured copy bandwidth), speed-ups against the HF peers."""
    kv_bytes = 2 * config.n_layers * config.kv_dim * element_size * batch * context
    step_bytes = config.decode_bytes(element_size) + kv_bytes
    floor_ms = step_bytes / (copy_gbps * 1e9) * 1e3 if copy_gbps else None
    times = {r.variant: r.ms_per_token for r in runs if r.ms_per_token}
    rows = []
    for r in runs:
        ms = r.ms_per_token
        row = {"model": name, "batch": batch, "variant": r.variant, "status": r.status,
               "ms_per_token": ms, "tokens_per_s": batch * 1e3 / ms if ms else None,
               "pct_floor": 100 * floor_ms / ms if ms and floor_ms else None}
        for key, peer in (("vs_hf_graph", "hf-graph"), ("vs_hf_compile", "hf-compile")):
            row[key] = times[peer] / ms if ms and peer in times else None
        row.update(build_seconds=r.build_seconds, near_ties=r.near_ties, reason=r.reason)
        rows.append(row)
    return rows


def save(out: Path, name: str, rows: list[dict], settings: dict) -> list[Path]:
    """JSON (with the environment and settings), CSV, Markdown, and a PNG of ms/token."""
    stem = f"demo-model-{name}"
    written = report.save(rows, out, stem, title=f"{name}: decode ms per token", **settings)
    path = report.plot(rows, Path(out) / f"{stem}.png", x="batch", y="ms_per_token",
                       title=f"{name} decode, {settings['dtype']}, prompt "
                       f"{settings['prompt_tokens']}, {settings['new_tokens']} new tokens",
                       ylabel="ms per token", logx=False)
    return written + ([path] if path else [])
