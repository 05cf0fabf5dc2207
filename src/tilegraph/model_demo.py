"""`tilegraph demo --model NAME`: a Llama-family model decoding five ways, measured in one run.

    hf-eager     transformers' model over a StaticCache, one forward a token
    hf-graph     that step captured by hand in a torch.cuda.CUDAGraph, one replay a token
    hf-compile   transformers' model under torch.compile(mode="reduce-overhead", fullgraph=True)
    plain-autotune  tilegraph's Llama decoding in plain PyTorch ops (Llama.plain_decode) under
                 torch.compile(mode="max-autotune", fullgraph=True), as gpt-fast compiles
    tilegraph    Llama.from_hf(the same weights) in a tg.Generator (sampling inside the graph)

Before its time counts, each variant is checked: prompts and a random continuation of
CHECK_STEPS tokens are teacher-forced through its decode path, and the logits of every step
must match one fp32 transformers forward over the same tokens (relative error within
MODEL_TOLERANCES). Then each decodes the same prompts greedily; ms/token is decode time from
the first new token to the last, divided by the steps between them. "same tokens" is the
share of greedy tokens equal to hf-eager's before a row's first difference (bf16 rounding
flips near-ties, after which the sequences part).

transformers' StaticCache appends at an internal counter on every forward (warm-ups and
capture too), so every HF variant resets its cache before it prefills.

Under torchrun with --tp N (run_tensor_parallel): tilegraph alone, at TP=N, at each halving
of N on the first ranks and at TP=1 on rank 0's GPU, each checked the same way on every rank
it runs on, with the all-reduce of a layer's output timed at each size.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ._runtime import synchronize
from .bench import Unavailable, report
from .bench import collectives as bench_collectives
from .dist import TensorParallel, local_config
from .generate import Generator
from .graph.capture import warm_up_without_host_syncs
from .models.hf_families import LEARNED_POSITION_TYPES
from .models.hf_presets import SHAPES, hf_auto_class, hf_config, random_hf_model
from .models.hf_weights import weight_files
from .models.llama import Llama
from .models.llama_config import LlamaConfig
from .testing import MODEL_TOLERANCES, rel_error

VARIANTS = ("hf-eager", "hf-graph", "hf-compile", "plain-autotune", "tilegraph")
CHECK_STEPS = 32   # teacher-forced decode steps checked before timing


@dataclass
class ModelRun:
    variant: str
    tokens: torch.Tensor | None = None   # (B, new) chosen tokens of the checked run
    ms_per_token: float | None = None
    build_seconds: float | None = None
    status: str = "ok"
    reason: str = ""
    rel_error: float | None = None   # worst step's logits against fp32 transformers
    same_tokens: float | None = None   # share of greedy tokens equal to hf-eager's
    tp: int = 1                      # GPUs the variant decodes on


class GreedyDecoder:
    """A greedy decode loop around a step of static tensors (ids (B, 1), position (1,)), so
    the step can be captured or compiled. Subclasses give the step and the prefill."""

    def __init__(self, batch: int, device: torch.device):
        self.ids = torch.zeros(batch, 1, dtype=torch.int64, device=device)
        self.position = torch.zeros(1, dtype=torch.int64, device=device)

    def step(self) -> torch.Tensor:
        """Logits (B, vocab) of ids at position; writes the cache there."""
        raise NotImplementedError

    def _prefill(self, prompts: torch.Tensor) -> torch.Tensor:
        """Logits (B, vocab) of each prompt's last token, the cache filled from position 0;
        sets position to the prompt length."""
        raise NotImplementedError

    @torch.no_grad()
    def run(self, prompts: torch.Tensor, new_tokens: int, step: Callable[[], torch.Tensor]
            ) -> tuple[torch.Tensor, float]:
        """Greedy tokens (B, new_tokens) and ms per decode step."""
        out = torch.empty(prompts.shape[0], new_tokens, dtype=torch.int64,
                          device=prompts.device)
        out[:, 0] = self._prefill(prompts).argmax(-1)
        synchronize(prompts.device)
        start = time.perf_counter()
        for i in range(1, new_tokens):
            self.ids.copy_(out[:, i - 1:i])
            out[:, i] = step().argmax(-1)
            self.position.add_(1)
        synchronize(prompts.device)
        return out, 1e3 * (time.perf_counter() - start) / max(new_tokens - 1, 1)

    @torch.no_grad()
    def score(self, prompts: torch.Tensor, continuation: torch.Tensor,
              step: Callable[[], torch.Tensor]) -> torch.Tensor:
        """Logits (B, n, vocab) predicting each token of continuation, teacher-forced."""
        logits = [self._prefill(prompts).float()]
        for i in range(1, continuation.shape[1]):
            self.ids.copy_(continuation[:, i - 1:i])
            # a copy: a captured step returns the same output buffer every replay (in fp32,
            # .float() alone would keep that buffer, and every step would read the last)
            logits.append(step().to(torch.float32, copy=True))
            self.position.add_(1)
        return torch.stack(logits, dim=1)


class HFDecoder(GreedyDecoder):
    """transformers' model over a StaticCache. With masks_on_device, the step passes
    attention masks it computes on the GPU from position, in place of transformers' own
    where those cannot be captured (below)."""

    def __init__(self, hf, batch: int, max_seq: int):
        from transformers import StaticCache

        super().__init__(batch, hf.device)
        self.hf = hf
        self.cache = StaticCache(config=_cache_config(hf.config, max_seq), max_cache_len=max_seq)
        self.forward = hf.forward
        # transformers 5.24 renamed past_key_values to cache (the old name goes in 5.40)
        name = "cache" if "cache" in inspect.signature(hf.forward).parameters \
            else "past_key_values"
        self.cache_arg = {name: self.cache}
        self.masks_on_device = False
        text = hf.config.get_text_config(decoder=True)
        # GPT-2's, OPT's and GPT-Neo's position embeddings are looked up at positions
        # transformers 5.25 counts on the host from the cache (a count a captured step
        # would replay frozen): given on the device instead
        self._positions_given = text.model_type in LEARNED_POSITION_TYPES
        self._layer_types = getattr(text, "layer_types", None)
        self._window = getattr(text, "sliding_window", None)
        self._kv_index = torch.arange(max_seq, device=hf.device)
        self._blocked = torch.full((1, 1, 1, max_seq), torch.finfo(hf.dtype).min,
                                   dtype=hf.dtype, device=hf.device)

    @torch.no_grad()
    def step(self) -> torch.Tensor:
        given = {"attention_mask": self._device_masks()} if self.masks_on_device else {}
        if self._positions_given:
            given["position_ids"] = self.position.view(1, 1).expand(self.ids.shape[0], 1)
        out = self.forward(input_ids=self.ids, **self.cache_arg, cache_position=self.position,
                           use_cache=True, **given)
        return out.logits[:, -1]

    def _device_masks(self) -> torch.Tensor | dict[str, torch.Tensor]:
        """Additive masks (1, 1, 1, max_seq) over the cache for the token at position, the
        same as transformers' (0 where attended, the dtype's min elsewhere; a sliding layer
        sees its last `window` positions): a dict by layer type where the model has them and
        a window; the sliding mask alone where a window names no layer types (every layer
        slides)."""
        seen = self._kv_index <= self.position
        full = self._blocked.masked_fill(seen, 0.0)
        if self._window is None:
            return full
        recent = seen & (self._kv_index > self.position - self._window)
        sliding = self._blocked.masked_fill(recent, 0.0)
        if not self._layer_types:   # a window on every layer (Phi-3, Mistral)
            return sliding
        return {"full_attention": full, "sliding_attention": sliding}

    def _prefill(self, prompts: torch.Tensor) -> torch.Tensor:
        self.cache.reset()
        length = prompts.shape[1]
        logits = self.hf(input_ids=prompts, **self.cache_arg, use_cache=True,
                         cache_position=torch.arange(length, device=prompts.device)).logits
        self.position.fill_(length)
        return logits[:, -1]


def _cache_config(config, max_seq: int):
    """The config transformers' StaticCache is built from: the model's, or where it has a
    sliding window (on the layers its layer_types name, or on every layer where it names
    none: transformers then makes every cache layer a sliding one), a copy whose cache
    layers are all full ones of max_seq positions. transformers' sliding-window cache layers
    count positions on the host, which a captured step freezes (its first replay was 46%
    off at Gemma 2 2B's shape, 51% at Gemma 3 1B's and 132% at Phi-3-mini's, transformers
    5.17); a full layer under the sliding mask attends as the window does."""
    text = config.get_text_config(decoder=True)
    if getattr(text, "sliding_window", None) is None:
        return config
    config = copy.deepcopy(config)
    text = config.get_text_config(decoder=True)
    text.layer_types = ["full_attention"] * text.num_hidden_layers
    return config


class PlainDecoder(GreedyDecoder):
    """tilegraph's Llama decoding through Llama.plain_decode (plain PyTorch ops) under
    torch.compile(mode="max-autotune", fullgraph=True), as gpt-fast compiles its step (with
    its coordinate-descent tuning of inductor's kernels, set where it compiles). The
    prompt is prefilled by Llama.prefill, untimed, so the cache is in plain_decode's layout."""

    def __init__(self, model: Llama, batch: int, max_seq: int):
        super().__init__(batch, model.device)
        self.model = model
        self.cache = model.new_cache(batch, max_seq)
        for tensor in (self.cache.k, self.cache.v, self.cache.cos, self.cache.sin):
            # cached state at fixed addresses (as transformers marks its StaticCache), so
            # the compiled step's CUDA graphs are not skipped for mutating an input
            torch._dynamo.mark_static_address(tensor)
        self.forward = torch.compile(model.plain_decode, mode="max-autotune", fullgraph=True)

    def step(self) -> torch.Tensor:
        rows = self.ids.shape[0]
        return self.forward(self.ids.view(rows), self.position.expand(rows), self.cache)

    def _prefill(self, prompts: torch.Tensor) -> torch.Tensor:
        self.cache.k.zero_()
        self.cache.v.zero_()
        self.position.fill_(prompts.shape[1])
        return self.model.prefill(prompts, self.cache)


def _hand_graph(decoder: HFDecoder, prompts: torch.Tensor) -> Callable[[], torch.Tensor]:
    """The step captured in a torch.cuda.CUDAGraph the way PyTorch's docs teach it."""
    # transformers' eager masks copy a host scalar to the GPU each step, which capture
    # refuses (Gemma 2, whose softcapped attention is eager alone; transformers 5.17)
    decoder.masks_on_device = decoder.hf.config._attn_implementation == "eager"
    decoder.run(prompts, 2, decoder.step)   # allocates the cache's tensors
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        # a step that waits on the host (transformers 5.17's Falcon copies a host list of
        # indices, its OPT sizes a mask by the cache's length) raises here, not inside the
        # capture, which would leave the process's CUDA RNG in capture state and every
        # later capture failing
        warm_up_without_host_syncs(decoder.step, ())
        for _ in range(2):
            decoder.step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        logits = decoder.step()

    def replay() -> torch.Tensor:
        graph.replay()
        return logits
    return replay


def _takes_a_cache(hf) -> bool:
    """Whether transformers' model decodes over a cache (the first GPT's takes none, and
    would read a step's one token as the whole sequence)."""
    parameters = inspect.signature(hf.forward).parameters
    return "cache" in parameters or "past_key_values" in parameters


def _eager(decoder: HFDecoder, prompts: torch.Tensor) -> Callable[[], torch.Tensor]:
    """The step as it is, run once first, so that a model that cannot decode over a static
    cache raises while it builds."""
    decoder.run(prompts, 2, decoder.step)
    return decoder.step


def _compiled(decoder: HFDecoder, prompts: torch.Tensor) -> Callable[[], torch.Tensor]:
    decoder.forward = torch.compile(decoder.hf.forward, mode="reduce-overhead", fullgraph=True)
    decoder.run(prompts, 4, decoder.step)   # compile, then record its graphs
    return decoder.step


def reference_logits(hf, prompts: torch.Tensor, continuation: torch.Tensor
                     ) -> tuple[torch.Tensor, list[float]]:
    """fp32 transformers, one forward over prompt + continuation: the logits (B, n, vocab)
    that predict each continuation token; and per step, the relative error of the same
    forward in the model's own dtype (how far rounding alone moves transformers)."""
    length, n = prompts.shape[1], continuation.shape[1]
    ids = torch.cat([prompts, continuation], dim=1)
    with torch.no_grad():
        own = hf(ids).logits[:, length - 1:length - 1 + n].float()
        with _in_float32(hf):
            reference = hf(ids).logits[:, length - 1:length - 1 + n]
    return reference, [rel_error(own[:, t], reference[:, t]) for t in range(n)]


@contextlib.contextmanager
def _in_float32(module: torch.nn.Module):
    """The module's floating-point parameters and buffers in fp32 meanwhile, each given its
    own dtype back after (exactly: fp32 holds every 16-bit value). No second copy of the
    weights: a deep copy in fp32 holds twice a 16-bit model's bytes beside it, which left
    Qwen1.5-MoE-A2.7B (14B parameters) out of an H100's memory."""
    own_dtypes = [(t, t.dtype) for t in itertools.chain(module.parameters(), module.buffers())
                  if t.is_floating_point()]
    for tensor, _ in own_dtypes:
        tensor.data = tensor.data.float()
    try:
        yield module
    finally:
        for tensor, dtype in own_dtypes:
            tensor.data = tensor.data.to(dtype)


def memory_shortfall(config: LlamaConfig, dtype: torch.dtype, free_bytes: int) -> str | None:
    """Why a GPU of `free_bytes` free cannot hold the demo's weights, or None: transformers'
    model and tilegraph's copy of it, each the parameters in `dtype` (the fp32 reference,
    upcast in place before tilegraph's copy exists, peaks at as much for 16-bit weights)."""
    weights = 2 * config.parameter_count() * torch.empty((), dtype=dtype).element_size()
    if weights <= free_bytes:
        return None
    return (f"transformers' model and tilegraph's copy of its weights need {weights / 1e9:.1f} "
            f"GB, more than the {free_bytes / 1e9:.1f} GB free on this GPU: run it on a GPU "
            "of more memory, or with --tp over several")


def check_logits(logits: torch.Tensor, reference: torch.Tensor, rounding: list[float],
                 tolerance: float) -> tuple[str, float, str]:
    """(status, worst relative error of a step, reason). A step passes within `tolerance`,
    or within 1.5x the error rounding alone gives transformers at that step (random weights
    of these shapes give logits so flat that bf16 transformers is 3% off at times)."""
    worst, reason = 0.0, ""
    for t in range(reference.shape[1]):
        error = rel_error(logits[:, t], reference[:, t])
        bound = max(tolerance, 1.5 * rounding[t])
        if error > bound and not reason:
            reason = (f"step {t}: logits relative error {error:.2e} > {bound:.1e} against "
                      "fp32 transformers")
        worst = max(worst, error)
    return ("FAIL" if reason else "ok"), worst, reason


Decode = Callable[[], tuple[torch.Tensor, float]]   # () -> (tokens (B, new), ms per step)
Score = Callable[[torch.Tensor], torch.Tensor]      # continuation -> logits (B, n, vocab)


def _build_peer(name: str, hf, model: Llama, prompts: torch.Tensor, new_tokens: int,
                max_seq: int) -> tuple[Decode, Score] | Unavailable:
    if name != "hf-eager" and not prompts.is_cuda:
        return Unavailable("needs CUDA")
    if name != "plain-autotune" and not _takes_a_cache(hf):
        return Unavailable(f"transformers' {type(hf).__name__} keeps no KV cache: it has no "
                           "decode step")
    try:
        decoder, step = _peer_step(name, hf, model, prompts, max_seq)
    except RuntimeError as error:
        # a peer that cannot build here (transformers 5.17's Falcon indexes a head with a
        # host list, a copy that graph capture refuses; transformers' ALiBi Falcon sizes
        # its bias for the prompt, not the cache) is reported, not the demo's end
        return Unavailable(f"{name} raised while building: {str(error).splitlines()[0]}")
    return (lambda: decoder.run(prompts, new_tokens, step),
            lambda continuation: decoder.score(prompts, continuation, step))


def _peer_step(name: str, hf, model: Llama, prompts: torch.Tensor, max_seq: int):
    """(decoder, its step) of a peer variant, built: compiled, captured or as it is."""
    if name == "plain-autotune":
        from torch._inductor import config as inductor

        decoder = PlainDecoder(model, prompts.shape[0], max_seq)
        # compile (autotuning each GEMM), record its graphs; gpt-fast's inductor setting
        with inductor.patch(coordinate_descent_tuning=True):
            decoder.run(prompts, 4, decoder.step)
        step = decoder.step
    else:
        decoder = HFDecoder(hf, prompts.shape[0], max_seq)
        builders = {"hf-eager": _eager, "hf-graph": _hand_graph, "hf-compile": _compiled}
        step = builders[name](decoder, prompts)
    return decoder, step


def _build_tilegraph(model: Llama, prompts: torch.Tensor, new_tokens: int, max_seq: int,
                     sizes, builds: dict, progress: Callable[[str], None]
                     ) -> tuple[Decode, Score]:
    """A Generator built twice: `builds` gets both times (cold: Triton compiles the kernels
    and tunes a shape no earlier process tuned; warm: both done)."""
    for label in ("cold", "warm"):
        generator = None   # the first one's cache freed before the second is made
        synchronize(model.device)
        start = time.perf_counter()
        generator = Generator(model, max_batch=prompts.shape[0], max_seq=max_seq, sizes=sizes,
                              progress=lambda what, b=label: progress(f"{b} build, {what}"))
        synchronize(model.device)
        builds[label] = time.perf_counter() - start

    def decode() -> tuple[torch.Tensor, float]:
        ids = generator.generate(prompts, new_tokens)
        return torch.tensor(ids, device=prompts.device), generator.stats.decode_ms_per_token
    return decode, lambda continuation: generator.score(prompts, continuation).float()


# Parameters the Triton interpreter decodes in seconds to a minute on CPU (the tiny-* shapes
# hold 17-26 thousand).
INTERPRETER_MAX_PARAMETERS = 2_000_000


@dataclass
class DemoModel:
    """What `--model` names: a shape of hf_presets.SHAPES (random weights), or a checkpoint
    directory: its config.json, and its weights (*.safetensors or pytorch_model*.bin) where it
    has them (else random weights of that config)."""
    spec: str

    @property
    def path(self) -> Path | None:
        return None if self.spec in SHAPES else Path(self.spec)

    @property
    def label(self) -> str:
        """The name in titles and result files."""
        path = self.path
        return self.spec if path is None else (path.resolve().name or "model")

    @property
    def has_weights(self) -> bool:
        return self.path is not None and bool(weight_files(self.path))

    @property
    def source(self) -> str:
        if self.path is None:
            return "random weights"
        return f"weights from {self.path}" if self.has_weights else \
            f"random weights of {self.path / 'config.json'}"

    def problem(self) -> str | None:
        """Why this spec names no model, or None."""
        if self.path is None or (self.path / "config.json").is_file():
            return None
        return (f"{self.spec} is neither a named shape ({', '.join(SHAPES)}) nor a checkpoint "
                "directory (config.json, and *.safetensors or pytorch_model*.bin for its "
                "weights)")

    def config(self):
        """The transformers config."""
        from transformers import AutoConfig

        return hf_config(self.spec) if self.path is None else \
            AutoConfig.from_pretrained(self.path)

    def llama_config(self) -> LlamaConfig:
        """Its config as tilegraph's Llama reads it; ValueError where that cannot run it."""
        return LlamaConfig.from_hf(self.config())

    def load(self, dtype: torch.dtype, device, seed: int = 0, **overrides):
        """The transformers model on `device` in `dtype`; `overrides` change a named shape."""
        if self.path is None:
            return random_hf_model(self.spec, dtype=dtype, device=device, seed=seed,
                                   **overrides)
        if overrides:
            raise ValueError("overrides change a named shape, not a checkpoint's config")
        if not self.has_weights:
            return random_hf_model(self.config(), dtype=dtype, device=device, seed=seed)
        auto = hf_auto_class(self.config())
        return auto.from_pretrained(self.path, dtype=dtype).to(device).eval()


def run(name: str, batch: int, prompt_len: int, new_tokens: int, max_seq: int,
        dtype: torch.dtype, device: str, variants=VARIANTS, sizes=(1, 2, 4, 8),
        progress: Callable[[str], None] = lambda what: None, seed: int = 0) -> dict:
    """Build every variant, then check and time each on the same prompts (built first: a
    torch.compile build makes every later graph launch of the process slower, and no
    variant should be timed before it while another is timed after). `name`: a DemoModel
    spec."""
    demo_model = DemoModel(name)
    name = demo_model.label
    progress(f"{name}: {demo_model.source}")
    hf = demo_model.load(dtype, device, seed)
    generator = torch.Generator().manual_seed(seed + batch)
    vocab = hf.config.get_text_config(decoder=True).vocab_size
    prompts = torch.randint(0, vocab, (batch, prompt_len), generator=generator).to(device)
    checked = min(CHECK_STEPS, new_tokens)   # prompt + new_tokens fit max_seq
    continuation = torch.randint(0, vocab, (batch, checked), generator=generator).to(device)
    # (before tilegraph's copy of the weights exists: the reference holds them in fp32)
    reference, rounding = reference_logits(hf, prompts, continuation)
    model = Llama.from_hf(hf)
    tolerance = MODEL_TOLERANCES[dtype]
    timed = prompts.is_cuda
    built, builds = {}, {}
    torch.compiler.reset()   # compiled steps of an earlier batch size (recompile limits)
    for variant in variants:
        progress(f"{name} batch {batch}: building {variant}")
        synchronize(device)
        start = time.perf_counter()
        if variant == "tilegraph":
            pair = _build_tilegraph(model, prompts, new_tokens, max_seq,
                                    tuple(s for s in sizes if s <= batch), builds,
                                    lambda what: progress(f"{name} batch {batch}: building "
                                                          f"tilegraph, {what}"))
        else:
            pair = _build_peer(variant, hf, model, prompts, new_tokens, max_seq)
        synchronize(device)
        seconds = builds["cold"] if variant == "tilegraph" else time.perf_counter() - start
        built[variant] = (pair, seconds)
    runs = []
    for variant, (pair, seconds) in built.items():
        progress(f"{name} batch {batch}: decoding {new_tokens} tokens with {variant}")
        runs.append(_checked_and_timed(ModelRun(variant, build_seconds=seconds), pair,
                                       continuation, reference, rounding, tolerance, timed))
    agree_with_eager(runs)
    return {"runs": runs, "config": model.config, "builds": builds}


def _checked_and_timed(result: ModelRun, pair: tuple[Decode, Score] | Unavailable,
                       continuation: torch.Tensor, reference: torch.Tensor,
                       rounding: list[float], tolerance: float, timed: bool) -> ModelRun:
    """The variant's teacher-forced logits checked; then, if they pass, its greedy tokens
    and (on a GPU) ms per token of a second, warmed-up decode."""
    if isinstance(pair, Unavailable):
        result.status, result.reason = "skipped", pair.reason
        return result
    decode, score = pair
    result.status, result.rel_error, result.reason = check_logits(
        score(continuation), reference, rounding, tolerance)
    if result.status == "ok":
        result.tokens, _ = decode()
        result.ms_per_token = decode()[1] if timed else None   # warmed up by the first
    return result


def run_tensor_parallel(name: str, batch: int, prompt_len: int, new_tokens: int,
                        max_seq: int, dtype: torch.dtype, tp: TensorParallel,
                        progress: Callable[[str], None] = lambda what: None,
                        seed: int = 0, **overrides) -> dict:
    """tilegraph at TP=tp.size on every rank, then at every halving of it (2 of 4 GPUs, ...)
    that the model's heads allow on the first ranks, each rank checked against fp32
    transformers; then TP=1 on rank 0's GPU; and the all-reduce of one layer's output timed
    in a graph at each size. `name`: a DemoModel spec; `overrides` change fields of a named
    shape's config. Rows of the runs this rank took part in (rank 0: all of them)."""
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() \
        else torch.device("cpu")
    demo_model = DemoModel(name)
    name = demo_model.label
    progress(f"{name}: {demo_model.source} (every rank the same)")
    hf = demo_model.load(dtype, device, seed, **overrides)
    config = LlamaConfig.from_hf(hf.config)
    generator = torch.Generator().manual_seed(seed + batch)
    vocab = hf.config.get_text_config(decoder=True).vocab_size
    prompts = torch.randint(0, vocab, (batch, prompt_len), generator=generator).to(device)
    continuation = torch.randint(0, vocab, (batch, min(CHECK_STEPS, new_tokens)),
                                 generator=generator).to(device)
    reference, rounding = reference_logits(hf, prompts, continuation)
    check = (continuation, reference, rounding, MODEL_TOLERANCES[dtype], prompts.is_cuda)
    buckets = tuple(s for s in (1, 2, 4, 8) if s <= batch)
    runs, all_reduce = [], {}
    for size in _tp_sizes(config, tp.size):
        group = tp.first(size)   # on every rank: making a group is collective
        if group is not None:
            progress(f"{name} batch {batch}: building and decoding at TP={size}")
            builds = {}
            model = Llama.from_hf(hf, tp=group)
            pair = _build_tilegraph(model, prompts, new_tokens, max_seq, buckets, builds,
                                    lambda what, s=size: progress(f"{name} batch {batch}: "
                                                                  f"TP={s}, {what}"))
            result = _checked_and_timed(ModelRun(f"tilegraph tp={size}", tp=size,
                                                 build_seconds=builds["cold"]), pair, *check)
            _every_rank_checked(result, group)
            runs.append(result)
            times = bench_collectives.all_reduce_us(group, (batch, config.dim), dtype)
            all_reduce[size] = {**times, "model_uses": model.all_reduce.kind,
                                "model_timing_us": model.all_reduce.times_us}
            del model, pair
        tp.barrier(f"the end of the TP={size} run")   # the ranks left out wait here
    if tp.rank == 0:
        progress(f"{name} batch {batch}: building and decoding at TP=1 on rank 0's GPU")
        builds = {}
        pair = _build_tilegraph(Llama.from_hf(hf), prompts, new_tokens, max_seq, buckets,
                                builds, lambda what: progress(f"{name} batch {batch}: TP=1, "
                                                              f"{what}"))
        runs.append(_checked_and_timed(ModelRun("tilegraph tp=1", build_seconds=builds["cold"]),
                                       pair, *check))
        del pair
    tp.barrier("rank 0's TP=1 run")
    return {"runs": runs, "config": config, "all_reduce_us": all_reduce}


def _tp_sizes(config: LlamaConfig, size: int) -> list[int]:
    """size, size / 2, ... down to 2, where the heads and the MLP still divide."""
    sizes = []
    while size > 1:
        try:
            local_config(config, size)
            sizes.append(size)
        except ValueError:
            if not sizes:
                raise
        if size % 2:
            break
        size //= 2
    return sizes


def _every_rank_checked(result: ModelRun, tp: TensorParallel) -> None:
    """Fail the row on every rank if any rank's check failed, naming that rank; and if the
    ranks chose different tokens."""
    import torch.distributed as dist

    if tp.size == 1:
        return
    reports = [None] * tp.size
    tokens = result.tokens.tolist() if result.tokens is not None else None
    dist.all_gather_object(reports, (result.status, result.reason, tokens), group=tp.group)
    for rank, (status, reason, rank_tokens) in enumerate(reports):
        if status != "ok" and result.status == "ok":
            result.status, result.reason = status, f"rank {rank}: {reason}"
        elif rank_tokens != tokens and result.status == "ok":
            result.status, result.reason = "FAIL", f"rank {rank} chose other tokens"


def agree_with_eager(runs: list[ModelRun]) -> None:
    """Share of each variant's greedy tokens equal to hf-eager's, up to the first that
    differs in each row (after it the prefixes differ): bf16 rounding flips near-ties."""
    eager = next((r.tokens for r in runs if r.variant == "hf-eager"
                  and r.tokens is not None), None)
    if eager is None:
        return
    for r in runs:
        if r.tokens is not None:
            same = (r.tokens == eager).int().cumprod(dim=1)
            r.same_tokens = same.float().mean().item()


def summarize(name: str, batch: int, runs: list[ModelRun], config, element_size: int,
              context: float, copy_gbps: float | None) -> list[dict]:
    """Rows: ms/token, tokens/s, % of the floor (weights and the KV bytes a step must read
    at the mean context, within each layer's sliding window, and the experts a batch's rows
    are expected to take, over measured copy bandwidth), speed-ups against the HF peers."""
    kv_bytes = config.kv_bytes(element_size, context) * batch
    step_bytes = (config.decode_bytes(element_size) + kv_bytes
                  + config.expert_bytes(element_size, batch))
    floor_ms = step_bytes / (copy_gbps * 1e9) * 1e3 if copy_gbps else None
    times = {r.variant: r.ms_per_token for r in runs if r.ms_per_token}
    rows = []
    for r in runs:
        ms = r.ms_per_token
        # each of tp GPUs reads 1/tp of the weights (the embedding row and norms, whole on
        # every GPU, are a rounding error)
        row = {"model": name, "batch": batch, "variant": r.variant, "status": r.status,
               "ms_per_token": ms, "tokens_per_s": batch * 1e3 / ms if ms else None,
               "pct_floor": 100 * floor_ms / r.tp / ms if ms and floor_ms else None}
        for key, peer in (("vs_hf_graph", "hf-graph"), ("vs_hf_compile", "hf-compile"),
                          ("vs_plain_autotune", "plain-autotune"),
                          ("vs_tp1", "tilegraph tp=1")):
            row[key] = times[peer] / ms if ms and peer in times else None
        row.update(build_seconds=r.build_seconds, rel_error=r.rel_error,
                   same_tokens=r.same_tokens, reason=r.reason)
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
