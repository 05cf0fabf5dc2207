"""Generator: prefill, then decode one CUDA graph replay per token.

    gen = tg.Generator(model, max_batch=8, max_seq=2048, sizes=(1, 2, 4, 8))
    ids = gen.generate(prompt_ids, max_new_tokens=256, temperature=0.0)  # new ids per row
    for tokens in gen.stream(prompt_ids, max_new_tokens=256): ...      # one list per step

A decode step is one GraphRunner graph per batch bucket: the model's forward over the static
KV cache, the choice of the next token (greedy, one kernel; or sampled on the device from a
seeded hash), written over the step's own token input, and positions + 1 over its position
input. So after the first call each step is a bare replay (GraphRunner.again: no copies in
or out), and each new token is also written into a device-side history at its position:
the host reads that history every `sync_every` tokens, to stream them and to stop at end of
sequence, while the next `sync_every` steps already run.

Each bucket has a graph per context band: lengths that attention reads whole before its
wait, then up to its one-run length (every sequence read by one program), then the rest
(sequences split over the SMs; context_bands), captured over windows of the cache with an
attention launch chosen for each band's lengths in the step.
The host knows every step's longest length, so each chunk of steps replays its band's graph.

A prefill is bound by the host's launches: on one GPU, prompts of up to 2048 padded rows
replay a graph captured per (prompts, padded length) on the shape's first call; longer ones,
and every prefill under tensor parallelism, run eagerly.
"""

from __future__ import annotations

import functools
import operator
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch

from . import sampling
from ._runtime import synchronize
from .dist.watchdog import Watchdog
from .errors import CollectiveError
from .graph import Graph, GraphRunner, capture
from .kernels.autotune import searches_run, timing_enabled
from .kernels.decode_attention import one_run_length, preloaded_length
from .kernels.decode_inputs import decode_inputs
from .kernels.greedy import greedy_step
from .kernels.matmul import m_bucket
from .models.llama import KVCache, Llama
from .testing import MODEL_TOLERANCES
from .tune import (
    tune_attention_in_step_once,
    tune_attention_once,
    tune_gemv_rows_in_step_once,
    tune_l2_ahead_in_step_once,
    tune_one_step_in_step_once,
    tune_release_in_step_once,
    tune_tuned_plans_in_step_once,
)


@dataclass
class GenerationStats:
    """Timing of the last generate/stream call (host clock, GPU synchronised)."""
    batch: int = 0
    prompt_tokens: int = 0
    new_tokens: int = 0          # per sequence, including those after end of sequence
    prefill_seconds: float = 0.0   # prompt to first token (the time to first token)
    decode_seconds: float = 0.0    # first token to the last (with a stream's consumer's time)

    @property
    def decode_ms_per_token(self) -> float:
        steps = self.new_tokens - 1
        return 1e3 * self.decode_seconds / steps if steps > 0 else float("nan")

    @property
    def tokens_per_second(self) -> float:
        """Generated tokens of all sequences per second of decoding."""
        ms = self.decode_ms_per_token
        return self.batch * 1e3 / ms if ms == ms else float("nan")


@dataclass
class _QueuedChunk:
    """Decode steps first..stop-1, queued: their tokens (batch, steps), on the host once the
    event `copied` (None off CUDA, where they are already there) has passed."""
    tokens: torch.Tensor
    copied: torch.cuda.Event | None
    first: int
    stop: int


class Generator:
    """Batched decoding of a tilegraph Llama with a static KV cache (see the module)."""

    def __init__(self, model: Llama, max_batch: int = 8, max_seq: int = 2048,
                 sizes: Sequence[int] | None = (1, 2, 4, 8), sync_every: int = 16,
                 progress: Callable[[str], None] | None = None):
        if not isinstance(model, Llama):
            raise TypeError(f"Generator takes a tilegraph.models.llama.Llama, got "
                            f"{type(model).__name__} (load one with Llama.from_hf)")
        if sizes and not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1
                             for s in sizes):
            raise ValueError(f"sizes must be positive ints (batch sizes with a graph of their "
                             f"own), got {tuple(sizes)!r}")
        sizes = tuple(sorted({s for s in sizes if s <= max_batch})) if sizes else ()
        if not sizes or sizes[-1] != max_batch:
            sizes = (*sizes, max_batch)  # every batch up to max_batch has a graph
        if not isinstance(sync_every, int) or sync_every < 1:
            raise ValueError(f"sync_every must be a positive int, got {sync_every!r}")
        self.model = model
        self.cache = model.new_cache(max_batch, max_seq)
        self.sizes = sizes
        self.bands = context_bands(max_seq, model.config.head_dim)
        # The cache as each band's graphs see it: its first `band` positions.
        self._windows = {band: self.cache.window(band) for band in self.bands}
        self.sync_every = sync_every
        # Says which part of the build runs: the choices, timed for a shape no process timed
        # before (then cached on disk), take minutes at batch 8.
        self._progress = progress or (lambda what: None)
        device = model.device
        # Every token of every sequence, by position: the decode graphs write here.
        self._history = torch.zeros(max_batch, max_seq, dtype=torch.int64, device=device)
        # Where _embed writes a runner's first call's embeddings and lengths.
        self._hidden = torch.empty(max_batch, model.config.dim, dtype=model.dtype,
                                   device=device)
        self._lengths = torch.empty(max_batch, dtype=torch.int64, device=device)
        # Sampling settings per row, read by the sampling graphs; set once per call.
        self._temperature = torch.ones(max_batch, device=device)
        self._top_k = torch.zeros(max_batch, dtype=torch.int64, device=device)
        self._top_p = torch.ones(max_batch, device=device)
        self._seed = torch.zeros(max_batch, dtype=torch.int64, device=device)
        # A queued chunk's tokens: gathered on the device, then copied into one of two host
        # buffers (one read while the next chunk's copy fills the other), all made here, so
        # the decode loop asks no allocator for memory while steps run (a page-locked
        # allocation is one of CUDA's implicitly synchronizing calls).
        self._chunk_offsets = torch.arange(sync_every - 1, -1, -1, device=device)
        self._chunk_columns = torch.empty(max_batch * sync_every, dtype=torch.int64,
                                          device=device)
        self._chunk_tokens = torch.empty_like(self._chunk_columns)
        self._host_tokens = torch.empty(2, max_batch * sync_every, dtype=torch.int64,
                                        pin_memory=device.type == "cuda")
        # Set on the device by a replayed all-reduce that gave up waiting for a peer: copied
        # with each chunk (one slot: the flag only ever goes from 0 to 1).
        self._collective_failed = model.all_reduce.failed
        self._host_failed = torch.zeros(1, dtype=torch.int32,
                                        pin_memory=self._collective_failed is not None)
        self._chunks_queued = 0
        self._load_chunk_kernels()
        self._runners: dict[bool, dict[int, GraphRunner]] = {}  # by band, greedy or sampled
        # prefills replayed from graphs, by (prompts, padded length); one pool for them all
        self._prefill_graphs: dict[tuple[int, int], Graph] = {}
        self._prefill_pool = (torch.cuda.graph_pool_handle()
                              if self.model.device.type == "cuda" else None)
        self._captured_after: dict[bool, int] = {}  # searches_run() when each was captured
        self.build_seconds: dict[str, float] = {}
        self.stats = GenerationStats()
        self._tune_step()
        self._runner(sampled=False)

    @property
    def max_batch(self) -> int:
        return self.cache.max_batch

    @property
    def max_seq(self) -> int:
        return self.cache.max_seq

    def _tune_step(self) -> None:
        """What the decode graphs run, timed once per GPU and shape and cached on disk:
        tg.decode_attention's launch shape for each batch size, in this model's decode step,
        among the rule (or the launch `tilegraph tune` timed alone) and variants that win in
        some models' steps and lose in others' (tune.tune_attention_in_step_once), for every
        context band at its own lengths, after checking in the step each
        projection whose shape `tilegraph tune` timed against the rule's plan
        (tune.tune_tuned_plans_in_step_once), and whether those on whole-slice tiles
        leave the K loop they never run out (tune.tune_one_step_in_step_once); and at batch 1
        how many weight
        rows a program each one-row projection reads, for those of 14-20 MiB whether it
        runs persistent and for short rows whether in small persistent tiles
        (tune.tune_gemv_rows_in_step_once),
        where the output and gate/up projections release the next kernel
        (tune.tune_release_in_step_once), and for each context band how much of gate/up's
        weights the output projection prefetches into L2 (_tune_l2_ahead). The in-step
        choices are not made under tensor parallelism, where every rank would have to replay
        its collectives in step: there attention's launch is timed alone
        (tune.tune_attention), each band's at its length. Alone it is not timed where the
        step chooses: at batch 1, 2 and 4 (TinyLlama) the launch timed alone was not the
        step's pick, at batch 8 it was the rule, and timing it took 9-12 s of the build a
        batch size (H200, notes/models.md, session 77). On
        CUDA, unless TILEGRAPH_AUTOTUNE=0; untuned, the kernels take their default rules."""
        if self.model.device.type != "cuda":
            return
        c = self.model.local
        heads = (c.n_heads, c.n_kv_heads, c.head_dim)
        shape = (*heads, self.max_seq, self.model.dtype)
        step = (c.dim, c.ffn_dim, c.n_layers, c.vocab_size)  # what else runs in the step
        start = time.perf_counter()
        if self.model.tp.size == 1 and timing_enabled():
            # The steps are timed and checked over random keys and values: over zeros every
            # position but the few the replays write holds the same key, so a launch that
            # read the wrong positions could pass the check. Prefill and decode write every
            # position before a step reads it.
            rng = torch.Generator(self.model.device).manual_seed(0)
            for keys_or_values in (self.cache.k, self.cache.v):
                keys_or_values.normal_(generator=rng)
        for size in self.sizes:
            if self.model.tp.size > 1:
                # no choice in the step: each band launches what is timed alone for it
                self._progress(f"choosing decode attention's launch at batch {size}")
                for band in self.bands:
                    tune_attention_once(size, *heads, band, self.model.dtype)
                continue
            tokens = torch.zeros(size, dtype=torch.int64, device=self.model.device)
            positions = torch.zeros_like(tokens)

            def capture_step(t=tokens, p=positions, cache=self.cache):
                return capture(self.model.decode, t, p, cache, restore_state=False)

            def plain_step(t=tokens, p=positions, cache=self.cache):
                return self.model.plain_decode(t, p, cache)

            def run_step(t=tokens, p=positions, cache=self.cache):
                return self.model.decode(t, p, cache)
            tolerance = MODEL_TOLERANCES[self.model.dtype]
            # Projections first: attention's launch is then chosen beside the plans they keep.
            layer, dtype = self.model.layers[0], self.model.dtype
            mlp = _mlp_projections(layer)
            shapes = {"q|k|v": tuple(layer.wqkv.shape), "output": tuple(layer.wo.shape),
                      **{name: shape[:2] for name, shape in mlp.items()},
                      "LM head": tuple(self.model.lm_head.shape)}
            if self.model.head_projection is not None:   # (OPT 350M's, before the head)
                shapes["head projection"] = tuple(self.model.head_projection.shape)
            step_key = (size, *shape[:-1], str(dtype), *step)
            tune_tuned_plans_in_step_once(step_key, size, shapes, dtype, capture_step,
                                          positions, self.max_seq, tolerance, self._progress,
                                          plain_step)
            tune_one_step_in_step_once(step_key, size, shapes, dtype, capture_step, positions,
                                       self.max_seq, tolerance, self._progress, plain_step)
            # Each band's launch timed at its own lengths, in a step over its window, the
            # longest band first: the shorter ones try its choice too.
            firsts = (0, *self.bands[:-1])   # each band's shortest position
            for shortest, band in reversed(tuple(zip(firsts, self.bands, strict=True))):
                lengths = f" at lengths {shortest + 1}-{band}" if len(self.bands) > 1 else ""
                self._progress(f"choosing attention's launch in the batch-{size} step{lengths}")
                tune_attention_in_step_once(
                    size, *heads, band, dtype, step,
                    functools.partial(capture_step, cache=self._windows[band]), positions,
                    tolerance, shortest, self.max_seq,
                    functools.partial(plain_step, cache=self._windows[band]))
            if size == 1:
                one_row_step = (*shape[:-1], str(dtype), *step)
                self._progress("choosing the batch-1 step's projection launches")
                tune_gemv_rows_in_step_once(
                    one_row_step, {"q|k|v": (*layer.wqkv.shape, True),
                                   "output": (*layer.wo.shape, False), **mlp},
                    dtype, capture_step, positions, self.max_seq, tolerance, plain_step,
                    run_step)
                projections = {"output": tuple(layer.wo.shape)}
                if "gate/up" in mlp:   # (a mixture's experts are no tg.linear)
                    projections["gate/up"] = mlp["gate/up"][:2]
                self._progress("choosing the batch-1 step's release points")
                tune_release_in_step_once(one_row_step, projections, dtype, capture_step,
                                          positions, self.max_seq, tolerance, plain_step,
                                          run_step)
                if not self.model.config.moe:   # (which expert comes next, none can tell)
                    self._tune_l2_ahead(one_row_step, capture_step, plain_step, run_step,
                                        positions, tolerance)
        self.build_seconds["tune step"] = time.perf_counter() - start

    def _tune_l2_ahead(self, step: tuple, capture_step, plain_step, run_step,
                       positions: torch.Tensor, tolerance: float) -> None:
        """How much of gate/up's weights the batch-1 step's output projection prefetches
        into L2 beside attention (Llama.l2_ahead_bytes), chosen per context band in the
        band's own step, the shortest band first (tune.tune_l2_ahead_in_step_once). Longer
        contexts keep attention reading more of the cache, so the bands after the first
        that takes none take none either, untimed."""
        layer = self.model.layers[0]
        gate_up_bytes = layer.w_gate_up.numel() * layer.w_gate_up.element_size()
        self._progress("choosing what the batch-1 step prefetches into L2")
        for shortest, band in zip((0, *self.bands[:-1]), self.bands, strict=True):
            window = {"cache": self._windows[band]}

            def apply(nbytes: int, band=band) -> None:
                self.model.l2_ahead_bytes[band] = nbytes
            chosen = tune_l2_ahead_in_step_once(
                step, tuple(layer.wo.shape), gate_up_bytes, self.model.dtype, apply,
                functools.partial(capture_step, **window), positions, band, tolerance,
                shortest, functools.partial(plain_step, **window),
                functools.partial(run_step, **window))
            if not chosen:
                break

    def _runner(self, sampled: bool, length: int | None = None) -> GraphRunner:
        """The decode graphs of the band that holds sequences of `length` positions (None:
        the longest band), one per size: every band's greedy ones at construction, sampling
        ones the first time a call samples."""
        if sampled not in self._runners:
            device = self.model.device
            example = (torch.zeros(self.max_batch, dtype=torch.int64, device=device),
                       torch.zeros(self.max_batch, dtype=torch.int64, device=device),
                       torch.zeros_like(self._hidden), torch.zeros_like(self._lengths))
            synchronize(device)
            start = time.perf_counter()
            step = self._sampled_step if sampled else self._greedy_step
            bands = (f", lengths up to {', '.join(map(str, self.bands))}"
                     if len(self.bands) > 1 else "")
            self._progress(f"capturing the {'sampling' if sampled else 'greedy'} decode "
                           f"graphs, batch {', '.join(map(str, self.sizes))}{bands}")
            # The warm-up writes the cache and the history at the example's positions:
            # every sequence's prefill and decode write them again before reading them.
            self._runners[sampled] = {
                band: GraphRunner(functools.partial(step, cache=self._windows[band]), example,
                                  sizes=self.sizes, restore_state=False)
                for band in self.bands}
            self._captured_after[sampled] = searches_run()
            self.build_seconds["sample" if sampled else "greedy"] = \
                time.perf_counter() - start
        runners = self._runners[sampled]
        if length is None:
            return runners[self.bands[-1]]
        return runners[next(band for band in self.bands if band >= length)]

    def _tuned_since(self, searches: int) -> bool:
        """Whether a tuner timed candidates since searches_run() read `searches`: graphs
        captured before a search replay slower for the rest of the process (a Qwen2-0.5B
        batch-1 step by 3%, H100) and those captured after it do not (notes/graphs.md), so
        the decode graphs are captured again (a GraphRunner does the same for searches
        while it is built). Not under tensor parallelism, where a rank that read its
        choices from disk would not capture with the others."""
        return searches_run() != searches and self.model.tp.size == 1

    def _capture_again(self, prompts: list[torch.Tensor], lengths: torch.Tensor,
                       sampled: bool) -> torch.Tensor:
        """The decode graphs captured anew after a tuner's search since they were (a
        prefill's first product of a new row count times its candidates). The capture's
        warm-up writes the cache at position 0, so the prompts go through again, from the
        tuned choices now: their first new tokens."""
        self._runners.clear()
        self._runner(sampled)
        return self._prefill(prompts, lengths, sampled)

    def _greedy_step(self, tokens: torch.Tensor, positions: torch.Tensor,
                     hidden: torch.Tensor, lengths: torch.Tensor, cache: KVCache):
        """One token a row over `cache` (a band's window), from the embeddings and lengths
        (positions + 1) of `tokens` at `positions`, as decode_inputs writes them: the argmax
        overwrites `tokens`, positions + 1 `positions`, and the new tokens' embeddings and
        lengths `hidden` and `lengths`, so the next step starts at its first projection."""
        logits = self.model.decode_embedded(hidden, positions, lengths, cache)
        greedy_step(logits, positions, self.cache.slots[:tokens.shape[0]], self._history,
                    tokens_out=tokens, positions_out=positions,
                    next_inputs=(self.model.embed, hidden, lengths),
                    position_table=self.model.positions)
        return tokens, positions, logits

    def _sampled_step(self, tokens: torch.Tensor, positions: torch.Tensor,
                      hidden: torch.Tensor, lengths: torch.Tensor, cache: KVCache):
        """The same with a sampled token."""
        logits = self.model.decode_embedded(hidden, positions, lengths, cache)
        following = positions + 1   # where the chosen tokens go: the draw's key
        chosen, following = self._record(self._sample(logits, following), following)
        tokens.copy_(chosen)
        positions.copy_(following)
        decode_inputs(tokens, positions, self.model.embed, hidden_out=hidden,
                      lengths_out=lengths, position_table=self.model.positions)
        return tokens, positions, logits

    def _embed(self, tokens: torch.Tensor, positions: torch.Tensor):
        """A runner's inputs for `tokens` at `positions` (batch,): them, their embeddings and
        their lengths (what each later step writes for the next). A runner pads all four
        with zeros: a padded row's length of 0 attends to nothing."""
        batch = tokens.shape[0]
        hidden, lengths = self._hidden[:batch], self._lengths[:batch]
        decode_inputs(tokens, positions, self.model.embed, hidden_out=hidden,
                      lengths_out=lengths, position_table=self.model.positions)
        return tokens, positions, hidden, lengths

    def _sample(self, logits: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        rows = logits.shape[0]
        return sampling.sample(logits, self._temperature[:rows], self._top_k[:rows],
                               self._top_p[:rows], self._seed[:rows], positions)

    def _record(self, tokens: torch.Tensor, positions: torch.Tensor):
        self._history[self.cache.slots[:tokens.shape[0]], positions] = tokens
        return tokens, positions

    # -- the public calls -------------------------------------------------------------------

    def generate(self, prompt_ids, max_new_tokens: int, *, temperature: float = 0.0,
                 top_k: int | None = None, top_p: float | None = None, seed: int = 0,
                 eos_token_id: int | Sequence[int] | None = None) -> list[list[int]]:
        """New token ids per sequence: max_new_tokens of them, or fewer ending with the
        first end-of-sequence token. prompt_ids: (B, T) tensor, one sequence (T,), or a
        list of B prompts, each a list of ids or a (T,) tensor (lengths may differ)."""
        rows: list[list[int]] | None = None
        stop = _stop_set(eos_token_id)
        done: list[bool] = []
        for step_tokens in self.stream(prompt_ids, max_new_tokens, temperature=temperature,
                                       top_k=top_k, top_p=top_p, seed=seed,
                                       eos_token_id=eos_token_id):
            if rows is None:
                rows, done = [[] for _ in step_tokens], [False] * len(step_tokens)
            for b, token in enumerate(step_tokens):
                if not done[b]:
                    rows[b].append(token)
                    done[b] = token in stop
        return rows or []

    def stream(self, prompt_ids, max_new_tokens: int, *, temperature: float = 0.0,
               top_k: int | None = None, top_p: float | None = None, seed: int = 0,
               eos_token_id: int | Sequence[int] | None = None) -> Iterator[list[int]]:
        """Yield one list of B new token ids per step, in chunks of `sync_every` steps (the
        first token at once). Stops early once every sequence has produced an end token;
        a sequence that finished first keeps yielding tokens that generate() drops."""
        prompts = self._prompts(prompt_ids)
        self._check_request(prompts, max_new_tokens, temperature, top_k, top_p, seed)
        sampled = temperature > 0
        self._runner(sampled)
        batch, device = len(prompts), self.model.device
        longest = max(len(p) for p in prompts)
        lengths = torch.tensor([len(p) for p in prompts], device=device)
        if sampled:
            self._set_sampling(batch, temperature, top_k, top_p, seed)
        stop = _stop_set(eos_token_id)
        self.stats = GenerationStats(batch, int(lengths.sum()), max_new_tokens)
        synchronize(device)
        start = time.perf_counter()
        tokens = self._prefill(prompts, lengths, sampled)
        if self._tuned_since(self._captured_after[sampled]):  # in this prefill, or before it
            tokens = self._capture_again(prompts, lengths, sampled)
        positions = lengths
        if self.model.tp.size > 1:   # the prefill's collectives, with the step named
            self._check_collectives("the prefill of the prompts")
        first = tokens.tolist()
        self.stats.prefill_seconds = time.perf_counter() - start
        yield first
        finished = [t in stop for t in first]
        produced = 1
        start = time.perf_counter()
        # One chunk of steps is always queued ahead of the one being read, so the GPU decodes
        # while the host waits for, copies and yields the last chunk's tokens; a batch that
        # ends early has computed at most one chunk it does not yield.
        pending, previous = None, None
        watchdog = Watchdog(self.model.tp, device)
        try:
            while True:
                with watchdog:   # armed while the host queues steps and waits for them
                    if produced < max_new_tokens and not all(finished):
                        chunk = min(self.sync_every, max_new_tokens - produced)
                        # its last step attends to this many positions of the longest prompt
                        runner = self._runner(sampled, longest + produced + chunk - 1)
                        queued, tokens, positions = self._queue_chunk(
                            runner, chunk, produced, tokens, positions, batch,
                            runner is not previous)
                        produced, previous = produced + chunk, runner
                    else:
                        queued = None
                    steps = [] if pending is None else self._read_chunk(pending, watchdog)
                for step_tokens in steps:
                    finished = [f or t in stop
                                for f, t in zip(finished, step_tokens, strict=True)]
                    yield step_tokens
                if pending is not None:
                    self.stats.decode_seconds = time.perf_counter() - start
                    self.stats.new_tokens = pending.stop
                if queued is None:
                    break
                pending = queued
        finally:
            watchdog.close()

    def _queue_chunk(self, runner: GraphRunner, chunk: int, produced: int,
                     tokens: torch.Tensor, positions: torch.Tensor, batch: int,
                     copy_in: bool):
        """Queue `chunk` decode steps after the `produced` tokens so far, then a copy of
        their tokens to the host, without waiting for any of it; `copy_in` where the last
        step was not this runner's (the first chunk, a new band). Returns the chunk, and the
        steps' token and position inputs."""
        for step in range(produced, produced + chunk):
            try:
                if copy_in and step == produced:  # later steps loop on their own inputs
                    tokens, positions, _ = runner(*self._embed(tokens, positions))
                else:
                    runner.again()
            except CollectiveError as error:   # raised eagerly (gloo): name the step
                raise CollectiveError(f"{error} (decode step {step})") from error
        new = self._last_tokens(positions, batch, chunk)
        host = self._host_tokens[self._chunks_queued % 2][:new.numel()].view(new.shape)
        self._chunks_queued += 1
        host.copy_(new, non_blocking=True)
        if self._collective_failed is not None:
            self._host_failed.copy_(self._collective_failed, non_blocking=True)
        queued = _QueuedChunk(host, _recorded_event(self.model.device), produced, produced + chunk)
        return queued, tokens, positions

    def _last_tokens(self, positions: torch.Tensor, batch: int, chunk: int) -> torch.Tensor:
        """Every row's last `chunk` tokens (batch, chunk), on the device, by position (the
        steps' own input, read in stream order, before the next chunk moves it on)."""
        shape, size = (batch, chunk), batch * chunk
        columns = torch.sub(positions[:, None], self._chunk_offsets[self.sync_every - chunk:],
                            out=self._chunk_columns[:size].view(shape))
        return torch.gather(self._history[:batch], 1, columns,
                            out=self._chunk_tokens[:size].view(shape))

    def _load_chunk_kernels(self) -> None:
        """Run _last_tokens once at each shape class (one row and one step take PyTorch's
        contiguous kernel, the others its strided one). CUDA loads a kernel the first time it
        runs (lazy loading, the default since CUDA 12.2), and loading synchronizes the
        context: with a stopped peer's collective still waiting there, the host blocked at
        the first decode's gather, before its deadline (2 H200s, session 39; loading the most
        likely reason)."""
        steps = min(2, self.sync_every, self.max_seq)
        for batch in sorted({1, min(2, self.max_batch)}):
            for chunk in sorted({1, steps}):
                positions = torch.full((batch,), chunk - 1, dtype=torch.int64,
                                       device=self.model.device)
                self._last_tokens(positions, batch, chunk)

    def _read_chunk(self, queued: _QueuedChunk, watchdog: Watchdog) -> list[list[int]]:
        """One list of the batch's tokens per step of a chunk _queue_chunk queued."""
        steps = f"decode steps {queued.first}..{queued.stop - 1}"
        tp = self.model.tp
        if queued.copied is not None:
            if tp.size > 1:
                # a deadline first: a replayed collective whose peer died would block the
                # wait below for ever
                tp.wait(queued.copied, steps)
            queued.copied.synchronize()
        if watchdog.fired or self._host_failed.item():
            raise self._gave_up(steps)
        rows = queued.tokens.tolist()
        return [[row[step] for row in rows] for step in range(queued.stop - queued.first)]

    def score(self, prompt_ids, continuation: torch.Tensor) -> torch.Tensor:
        """Logits (B, n, vocab) the decode graphs give each token of `continuation` (B, n),
        teacher-forced after the prompts: what the model predicted at every step, for
        checking the graphs against a reference or computing log-likelihoods."""
        prompts = self._prompts(prompt_ids)
        if (not isinstance(continuation, torch.Tensor) or continuation.ndim != 2
                or continuation.shape[0] != len(prompts) or continuation.is_floating_point()
                or continuation.is_complex() or continuation.dtype == torch.bool):
            raise ValueError(f"continuation must be a ({len(prompts)}, n) tensor of integer "
                             "ids")
        vocab = self.model.config.vocab_size
        if continuation.numel() and not 0 <= int(continuation.min()) <= int(
                continuation.max()) < vocab:
            raise ValueError(f"continuation ids must lie in [0, {vocab}), got "
                             f"{int(continuation.min())}..{int(continuation.max())}")
        continuation = continuation.to(device=self.model.device, dtype=torch.int64)
        steps = continuation.shape[1]
        self._check_request(prompts, steps, 0.0, None, None, 0)
        lengths = torch.tensor([len(p) for p in prompts], device=self.model.device)
        logits = [self._prefill_logits(prompts)]
        positions, longest = lengths, max(len(p) for p in prompts)
        for step in range(steps - 1):
            runner = self._runner(False, longest + step + 1)
            _, positions, step_logits = runner(*self._embed(continuation[:, step].contiguous(),
                                                           positions))
            logits.append(step_logits.clone())
        if self.model.tp.size > 1:
            self._check_collectives(f"scoring {steps} tokens")
        return torch.stack(logits, dim=1)

    def _check_collectives(self, what: str) -> None:
        """Wait for the work queued so far, under the group's deadline, and raise if one of
        its replayed all-reduces gave up waiting for a peer (tensor parallel only)."""
        self.model.tp.wait(_recorded_event(self.model.device), what)
        if self._collective_failed is not None and self._collective_failed.item():
            raise self._gave_up(what)

    def _gave_up(self, what: str) -> CollectiveError:
        return self.model.tp.error(f"{what} did not finish within {self.model.tp.timeout:.0f} "
                                   "s: the collectives waiting for a peer gave up")

    def _prefill_logits(self, prompts: list[torch.Tensor]) -> torch.Tensor:
        """Each prompt's last logits, the prompts run a group of neighbours at a time
        (padding_groups): replayed from the graph of the group's shape, padded to
        prefill_length's, or eagerly, padded to the group's longest."""
        logits = []
        for group in padding_groups([len(p) for p in prompts]):
            rows = [prompts[b] for b in group]
            lengths = [len(p) for p in rows]
            padded = prefill_length(max(lengths), self.max_seq)
            if self._prefill_in_graphs(len(rows) * padded):
                logits.append(self._prefill_replayed(_padded(rows, padded), group.start,
                                                     lengths))
            else:
                logits.append(self.model.prefill(_padded(rows, max(lengths)), self.cache,
                                                 first_slot=group.start, lengths=lengths))
        return torch.cat(logits)

    def _prefill_in_graphs(self, rows: int) -> bool:
        """Whether a prefill of `rows` (prompts x padded length) replays a graph: on CUDA, on
        one GPU (a rank's graph of collectives would have to replay with the others'), up to
        PREFILL_GRAPH_MAX_ROWS."""
        return (self.model.device.type == "cuda" and self.model.tp.size == 1
                and rows <= PREFILL_GRAPH_MAX_ROWS)

    def _prefill_replayed(self, ids: torch.Tensor, first_slot: int, lengths: list[int]
                          ) -> torch.Tensor:
        """model.prefill_rows of prompts `ids` (B, padded length) into slots first_slot..,
        each prompt's logits at its last token, from the graph of its shape (captured on its
        first call; its warm-up tunes what the prefill's products need)."""
        batch, padded = ids.shape
        slots = torch.arange(first_slot, first_slot + batch, device=ids.device)
        ends = torch.tensor([n - 1 for n in lengths], device=ids.device)
        graph = self._prefill_graphs.get((batch, padded))
        if graph is None:
            self._progress(f"capturing the prefill of {batch} prompt{'s' * (batch > 1)} "
                           f"padded to {padded} tokens")
            start = time.perf_counter()

            def prefill(ids, slots, ends, model=self.model, cache=self.cache):
                return model.prefill_rows(ids, cache, slots, ends)
            graph = capture(prefill, ids.clone(), slots, ends, pool=self._prefill_pool,
                            restore_state=False)
            self._prefill_graphs[(batch, padded)] = graph
            # all prefill graphs' captures (with their warm-ups' tuning) so far
            self.build_seconds["prefill graphs"] = (self.build_seconds.get("prefill graphs", 0)
                                                    + time.perf_counter() - start)
        for static, value in zip(graph.inputs, (ids, slots, ends), strict=True):
            static.copy_(value)
        # cloned: the next prefill graph, sharing the pool, may write where this one's are
        return graph.replay().clone()

    def _prefill(self, prompts: list[torch.Tensor], lengths: torch.Tensor, sampled: bool
                 ) -> torch.Tensor:
        """Prompts through the model (_prefill_logits), their first new tokens chosen and
        recorded. Returns those tokens (B,)."""
        logits = self._prefill_logits(prompts)
        positions = lengths
        chosen = self._sample(logits, positions) if sampled else sampling.greedy(logits)
        return self._record(chosen, positions)[0]

    def _set_sampling(self, batch: int, temperature: float, top_k: int | None,
                      top_p: float | None, seed: int) -> None:
        self._temperature[:batch] = temperature
        self._top_k[:batch] = top_k or 0
        self._top_p[:batch] = 1.0 if top_p is None else top_p
        self._seed[:batch] = sampling.row_seeds(seed, batch, self._seed.device)

    def _prompts(self, prompt_ids) -> list[torch.Tensor]:
        device = self.model.device
        if isinstance(prompt_ids, torch.Tensor):
            _check_integer_ids(prompt_ids)
            if prompt_ids.ndim == 1:
                prompt_ids = prompt_ids[None]
            if prompt_ids.ndim != 2:
                raise ValueError(f"prompt_ids must be (B, T) or (T,), got shape "
                                 f"{tuple(prompt_ids.shape)}")
            rows = list(prompt_ids.to(device=device, dtype=torch.int64))
        elif isinstance(prompt_ids, (list, tuple)) and prompt_ids and all(
                isinstance(p, (list, tuple, torch.Tensor)) for p in prompt_ids):
            rows = [_prompt_row(p, device) for p in prompt_ids]
        elif isinstance(prompt_ids, (list, tuple)) and prompt_ids:
            rows = [_prompt_row(prompt_ids, device)]
        elif isinstance(prompt_ids, (list, tuple)):
            raise ValueError("prompt_ids is empty: give at least one prompt")
        else:
            raise TypeError("prompt_ids must be a (B, T) tensor, a (T,) tensor, a list of "
                            "ids or a list of B prompts (lists of ids or (T,) tensors)")
        if not rows or any(r.numel() == 0 for r in rows):
            raise ValueError("every prompt needs at least one token")
        vocab = self.model.config.vocab_size
        low = min(int(r.min()) for r in rows)
        high = max(int(r.max()) for r in rows)
        if low < 0 or high >= vocab:
            raise ValueError(f"token ids must lie in [0, {vocab}), got {low}..{high}")
        return rows

    def _check_request(self, prompts: list[torch.Tensor], max_new_tokens: int,
                       temperature: float, top_k: int | None, top_p: float | None,
                       seed: int) -> None:
        """Capacity and settings, before any work."""
        if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a positive int, got {max_new_tokens!r}")
        if len(prompts) > self.max_batch:
            raise ValueError(f"{len(prompts)} sequences exceed max_batch={self.max_batch}")
        longest = max(len(p) for p in prompts)
        if longest + max_new_tokens > self.max_seq:
            raise ValueError(f"a prompt of {longest} tokens + {max_new_tokens} new tokens "
                             f"exceeds max_seq={self.max_seq}")
        if not temperature >= 0:
            raise ValueError(f"temperature must be >= 0, got {temperature!r}")
        if top_k is not None and (not isinstance(top_k, int) or top_k < 0):
            raise ValueError(f"top_k must be a non-negative int or None, got {top_k!r}")
        if top_p is not None and not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
        if not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        if temperature == 0 and (top_k or top_p not in (None, 1.0)):
            raise ValueError("top_k and top_p apply to sampling: give temperature > 0 "
                             "(temperature=0 is greedy)")


# Prompts of different lengths are prefilled together, padded to the longest, while the
# padded rows stay within PADDED_ROWS_RATIO of the prompts' own or PADDED_ROWS_FREE in all.
# A prefill is bound by the host's launches, not by its rows: TinyLlama's of 128 tokens took
# 37 ms, of which 1.6 ms of GPU work (H200, notes/models.md, session 78), and each prompt
# prefilled alone paid it again; four times the rows would still take a fraction of it.
PADDED_ROWS_RATIO = 1.5
PADDED_ROWS_FREE = 512


def _mlp_projections(layer) -> dict[str, tuple[int, int, bool]]:
    """The MLP's tg.linear projections in a decode step, as the step tuners take them:
    name -> (N, K, whether the norm is in its prologue). A mixture of experts has one, its
    router (its experts are kernels of their own)."""
    if layer.w_router is not None:
        return {"router": (*layer.w_router.shape, True)}
    return {"gate/up": (*layer.w_gate_up.shape, True), "down": (*layer.w_down.shape, False)}


def padding_groups(lengths: Sequence[int]) -> list[range]:
    """The prompts (by their lengths, in order) split into runs of neighbours prefilled as
    one batch: a run grows while its count times its longest length stays within
    PADDED_ROWS_FREE or PADDED_ROWS_RATIO times its lengths' sum."""
    groups: list[range] = []
    start = 0
    for end in range(1, len(lengths) + 1):
        run = lengths[start:end]
        padded = len(run) * max(run)
        if padded > PADDED_ROWS_FREE and padded > PADDED_ROWS_RATIO * sum(run):
            groups.append(range(start, end - 1))
            start = end - 1
    groups.append(range(start, len(lengths)))
    return groups


def _padded(prompts: list[torch.Tensor], length: int) -> torch.Tensor:
    """The prompts (1-D) as a (B, length) batch, each padded at its end with token 0."""
    return torch.stack([torch.nn.functional.pad(p, (0, length - len(p))) for p in prompts])


# Prefills of up to this many rows (prompts x padded length) replay a graph captured for
# their shape, each prompt padded to prefill_length's; longer ones run eagerly, where their
# GPU work outweighs the host's launches. TinyLlama's time to a first token at 128 tokens
# went from 34.5 ms eagerly to 2.05 ms replayed, and at 1792 tokens (2048 padded rows) from
# 34.5 to 18.0 ms untuned (H200, notes/models.md, session 79).
PREFILL_GRAPH_MAX_ROWS = 2048


def prefill_length(longest: int, max_seq: int) -> int:
    """The length prompts of at most `longest` tokens are padded to for a prefill graph:
    matmul.m_bucket's (a power of two, or 1.5 times one past 16), at most max_seq."""
    return min(m_bucket(longest), max_seq)


# A band where sequences are split spans at most this ratio of lengths.
BAND_RATIO = 4


def context_bands(max_seq: int, head_dim: int) -> tuple[int, ...]:
    """The longest length of each context band the decode graphs are captured for: up to
    what attention reads before its wait in one run, then up to its one-run length, where a
    sequence is read by one program, then bands of at most BAND_RATIO times the lengths,
    where it is split over the SMs. One launch for both of the last two loses in one of
    them: a TinyLlama batch-1 step with a run's first two tiles read before the wait was
    4.1-5.2% faster at 160-384 positions and 6.1% slower at 768 than with one (session 71).
    Nor does one split launch suit 385-2048 positions: with twice the blocks of q heads
    TinyLlama's step was 2.9% slower at 1024 and 1.2-1.9% faster at 1800-2048 (session 75).
    And past what is read before the wait, Qwen2-0.5B's step was 3% faster with runs of one
    tile than with the launch that is fastest below it (H200, notes/models.md, session 81)."""
    one_run = min(one_run_length(head_dim), max_seq)
    bands = sorted({min(preloaded_length(head_dim), one_run), one_run})
    while bands[-1] < max_seq:
        bands.append(min(BAND_RATIO * bands[-1], max_seq))
    if len(bands) > 2 and 4 * max_seq < 5 * bands[-2]:
        del bands[-2]   # no last band of under a quarter more lengths than the one before
    return tuple(bands)


def _recorded_event(device: torch.device) -> torch.cuda.Event | None:
    if device.type != "cuda":
        return None
    event = torch.cuda.Event()
    event.record()
    return event


def _check_integer_ids(ids: torch.Tensor) -> None:
    if ids.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"prompt_ids must hold integer token ids, got {ids.dtype}")


def _prompt_row(prompt, device: torch.device) -> torch.Tensor:
    """One prompt, a list of ids or a (T,) tensor, as int64 ids on `device`. Ids must be
    integers: a float would be cut to one silently."""
    if isinstance(prompt, torch.Tensor):
        _check_integer_ids(prompt)
        if prompt.ndim != 1:
            raise ValueError(f"a prompt given as a tensor must be (T,), got shape "
                             f"{tuple(prompt.shape)}")
        return prompt.to(device=device, dtype=torch.int64)
    ids = []
    for token in prompt:
        try:
            ids.append(operator.index(token))
        except TypeError:
            raise TypeError(f"token ids must be integers, got {token!r}") from None
    return torch.tensor(ids, dtype=torch.int64, device=device)


def _stop_set(eos_token_id) -> frozenset[int]:
    if eos_token_id is None:
        return frozenset()
    if isinstance(eos_token_id, int):
        return frozenset((eos_token_id,))
    return frozenset(int(t) for t in eos_token_id)

