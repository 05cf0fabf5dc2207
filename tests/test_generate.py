"""tg.Generator: decode one graph replay per token, tokens as Hugging Face's; sampling."""

import pytest
import torch

import tilegraph as tg
from _hf_cache import hf_next
from tilegraph import generate, sampling, tune
from tilegraph.kernels import _matvec, autotune, decode_plan, matmul
from tilegraph.kernels import decode_attention as attention
from tilegraph.kernels._launch import sm_count
from tilegraph.models import Llama
from tilegraph.models.hf_presets import random_hf_model
from tilegraph.testing import MODEL_TOLERANCES, rel_error

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def hf():
    return random_hf_model("tiny-llama3", scale=5.0, num_hidden_layers=1)  # fast on CPU


@pytest.fixture(scope="module")
def generator(hf):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = Llama.from_hf(hf, device=device)
    return tg.Generator(model, max_batch=3, max_seq=48, sizes=(1, 3), sync_every=5)


def _hf_greedy(hf, prompt, new_tokens):
    ids = torch.tensor([prompt])
    # An explicit mask: without one, HF takes prompt tokens equal to pad_token_id for padding.
    out = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                      min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    return out[0, len(prompt):].tolist()


def test_greedy_tokens_equal_hf_for_32_new_tokens(hf, generator):
    prompt = torch.randint(0, 67, (11,)).tolist()
    assert generator.generate([prompt], 32) == [_hf_greedy(hf, prompt, 32)]
    stats = generator.stats
    assert stats.batch == 1 and stats.new_tokens == 32 and stats.prompt_tokens == 11


def test_batch_of_ragged_prompts(hf, generator):
    prompts = [torch.randint(0, 67, (n,)).tolist() for n in (3, 8, 5)]
    out = generator.generate(prompts, 9)
    assert out == [_hf_greedy(hf, p, 9) for p in prompts]


def test_ragged_prompts_prefill_in_one_call_while_padding_stays_small(hf, generator,
                                                                      monkeypatch):
    """Neighbouring prompts are prefilled as one padded batch while their padded rows stay
    within PADDED_ROWS_FREE, or within PADDED_ROWS_RATIO of their own; past both a prompt
    far shorter than its neighbour starts a batch of its own. The tokens are HF's either
    way."""
    assert generate.padding_groups([30, 2, 3]) == [range(0, 3)]      # 90 padded rows: free
    assert generate.padding_groups([300, 200, 250]) == [range(0, 3)]  # 900 for 750
    assert generate.padding_groups([300, 20, 30]) == [range(0, 1), range(1, 3)]
    assert generate.padding_groups([40, 40, 400]) == [range(0, 2), range(2, 3)]
    assert generate.padding_groups([9]) == [range(0, 1)]
    monkeypatch.setattr(generate, "PADDED_ROWS_FREE", 0)
    assert generate.padding_groups([3, 8, 5]) == [range(0, 3)]          # 24 rows for 16
    assert generate.padding_groups([30, 2, 3]) == [range(0, 1), range(1, 3)]
    # the eager path (on CUDA prefills replay graphs: the next test)
    monkeypatch.setattr(tg.Generator, "_prefill_in_graphs", lambda self, rows: False)
    calls = []
    prefill = generator.model.prefill

    def counted(ids, *args, **kwargs):
        calls.append(tuple(ids.shape))
        return prefill(ids, *args, **kwargs)
    monkeypatch.setattr(generator.model, "prefill", counted)
    for lengths, shapes in (((3, 8, 5), [(3, 8)]), ((30, 2, 3), [(1, 30), (2, 3)])):
        calls.clear()
        prompts = [torch.randint(0, 67, (n,)).tolist() for n in lengths]
        assert generator.generate(prompts, 4) == [_hf_greedy(hf, p, 4) for p in prompts]
        assert calls == shapes


def test_prefills_replay_graphs_of_their_shape_padded_to_a_bucket(hf, monkeypatch):
    """Where prefills replay graphs (forced here on the CPU too), a group of prompts is
    padded to prefill_length's and run from the graph of (prompts, padded length), captured
    on its first call and replayed after: the tokens are HF's, and a later call of the same
    shape captures nothing."""
    assert [generate.prefill_length(n, 48) for n in (1, 5, 16, 17, 24, 25, 40)] == \
        [1, 8, 16, 24, 24, 32, 48]
    assert generate.prefill_length(40, 36) == 36
    device = "cuda" if torch.cuda.is_available() else "cpu"
    monkeypatch.setattr(tg.Generator, "_prefill_in_graphs", lambda self, rows: True)
    generator = tg.Generator(Llama.from_hf(hf, device=device), max_batch=3, max_seq=48,
                             sizes=(1, 3), sync_every=5)
    eager = []
    prefill = generator.model.prefill
    monkeypatch.setattr(generator.model, "prefill", lambda *a, **k: eager.append(a) or
                        prefill(*a, **k))
    for lengths, shapes in (((3, 8, 5), {(3, 8)}), ((7,), {(3, 8), (1, 8)}),
                            ((6, 4, 7), {(3, 8), (1, 8)}), ((20,), {(3, 8), (1, 8), (1, 24)})):
        prompts = [torch.randint(0, 67, (n,)).tolist() for n in lengths]
        assert generator.generate(prompts, 4) == [_hf_greedy(hf, p, 4) for p in prompts]
        assert set(generator._prefill_graphs) == shapes
    assert not eager
    assert generator.build_seconds["prefill graphs"] > 0   # reported apart from the calls'


def test_batch_of_equal_prompts_as_a_tensor_runs_a_smaller_bucket(hf, generator):
    ids = torch.randint(0, 67, (2, 7))     # 2 rows: padded into the graph of 3
    assert generator.generate(ids, 6) == [_hf_greedy(hf, row.tolist(), 6) for row in ids]


@pytest.mark.parametrize("eos_at", [3, 8])   # in the first chunk of 5 steps, or a later one
def test_end_of_sequence_stops_each_row(hf, generator, eos_at):
    prompt = torch.randint(0, 67, (6,)).tolist()
    greedy = _hf_greedy(hf, prompt, 24)
    eos = greedy[eos_at]
    out = generator.generate([prompt], 24, eos_token_id=eos)[0]
    assert out == greedy[:greedy.index(eos) + 1]
    # the chunk queued while the host read the one with the end token is not streamed
    assert generator.stats.new_tokens < 16


def test_context_bands_split_where_attention_splits_sequences():
    # two 128-tiles read before the wait, one run of three, then bands of at most four
    # times the lengths
    assert generate.context_bands(2048, 64) == (256, 384, 1536, 2048)
    assert generate.context_bands(2048, 128) == (128, 192, 768, 2048)  # of 64-tiles
    assert generate.context_bands(8192, 64) == (256, 384, 1536, 6144, 8192)
    assert generate.context_bands(1536, 64) == (256, 384, 1536)
    # no last band of under a quarter more lengths than the one before it
    assert generate.context_bands(1900, 64) == (256, 384, 1900)
    assert generate.context_bands(1920, 64) == (256, 384, 1536, 1920)
    assert generate.context_bands(400, 64) == (256, 400)
    assert generate.context_bands(384, 64) == (256, 384)
    assert generate.context_bands(300, 64) == (256, 300)
    assert generate.context_bands(200, 64) == (200,) and generate.context_bands(48, 16) == (48,)


def test_steps_cross_three_bands(hf, monkeypatch):
    """A generation that passes two band ends replays each band's graphs in turn, and its
    tokens are transformers'."""
    monkeypatch.setattr(generate, "one_run_length", lambda head_dim: 16)
    monkeypatch.setattr(generate, "BAND_RATIO", 2)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    generator = tg.Generator(Llama.from_hf(hf, device=device), max_batch=1, max_seq=48,
                             sizes=(1,), sync_every=4)
    assert generator.bands == (16, 32, 48)
    prompt = torch.randint(0, 67, (11,)).tolist()
    assert generator.generate([prompt], 30) == [_hf_greedy(hf, prompt, 30)]
    replays = [sum(s["replays"] for s in generator._runners[False][band].stats().values())
               for band in generator.bands]
    assert replays == [4, 16, 9]   # chunks of 4 steps reaching 16, 32 and 40 positions


def test_steps_past_a_band_replay_the_next_band_s_graphs(hf, monkeypatch):
    """With bands of 16 and 48 positions, a generation from 11 positions replays the first
    band's graphs while its steps attend to at most 16 positions and the second's after; the
    tokens and the teacher-forced logits are transformers'."""
    monkeypatch.setattr(generate, "one_run_length", lambda head_dim: 16)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    generator = tg.Generator(Llama.from_hf(hf, device=device), max_batch=2, max_seq=48,
                             sizes=(1, 2), sync_every=5)
    assert generator.bands == (16, 48)
    prompt = torch.randint(0, 67, (11,)).tolist()
    assert generator.generate([prompt], 16) == [_hf_greedy(hf, prompt, 16)]

    def replays(band):
        return sum(s["replays"] for s in generator._runners[False][band].stats().values())
    assert (replays(16), replays(48)) == (5, 10)  # steps 1-5 reach 16 positions, 6-15 26
    prompts = torch.randint(0, 67, (2, 12))
    continuation = torch.randint(0, 67, (2, 8))
    logits = generator.score(prompts, continuation.to(device))
    with torch.no_grad():
        ref = hf(torch.cat([prompts, continuation], dim=1)).logits[:, 11:19]
    assert rel_error(logits, ref) <= MODEL_TOLERANCES[torch.float32]
    assert (replays(16), replays(48)) == (5 + 4, 10 + 3)   # 13-16 positions, then 17-19


def test_the_next_chunk_runs_while_the_last_is_read(generator, monkeypatch):
    queued = []
    queue = generator._queue_chunk

    def counted(runner, chunk, produced, *rest):
        queued.append(produced + chunk)   # the tokens produced once this chunk has run
        return queue(runner, chunk, produced, *rest)
    monkeypatch.setattr(generator, "_queue_chunk", counted)
    stream = generator.stream([[1, 2, 3]], 12)   # chunks of 5: steps 1-5, 6-10, 11
    next(stream)                                 # the prefill's token
    next(stream)                                 # step 1's
    assert queued == [6, 11], "steps 6-10 are queued before step 1's token is read"
    assert len(list(stream)) == 10 and queued == [6, 11, 12]


def test_decode_graphs_are_captured_again_after_a_tuner_searched(hf, monkeypatch):
    """Graphs captured before a tuner's search (a prefill's first product of a row count)
    replay slower after it: the Generator captures its decode graphs again, and prefills
    again, since the capture's warm-up writes the cache at position 0. Here the first
    prefill counts a search; the tokens stay transformers'."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    generator = tg.Generator(Llama.from_hf(hf, device=device), max_batch=2, max_seq=48,
                             sizes=(1, 2), sync_every=5)
    searches, prefills = [generate.searches_run()], []   # earlier tests' searches counted
    prefill = generator._prefill

    def prefill_that_tunes(*args):
        searches[0] += not prefills
        prefills.append(args[0])
        return prefill(*args)
    monkeypatch.setattr(generate, "searches_run", lambda: searches[0])
    monkeypatch.setattr(generator, "_prefill", prefill_that_tunes)
    before = generator._runner(sampled=False)
    prompts = [torch.randint(1, 67, (n,)).tolist() for n in (9, 4)]
    assert generator.generate(prompts, 12) == [_hf_greedy(hf, p, 12) for p in prompts]
    after = generator._runner(sampled=False)
    assert after is not before and len(prefills) == 2
    monkeypatch.setattr(generator, "_prefill", prefill)   # nothing searched any more
    assert generator.generate(prompts[:1], 7) == [_hf_greedy(hf, prompts[0], 7)]
    assert generator._runner(sampled=False) is after


@pytest.mark.gpu
def test_a_prefill_that_tunes_leaves_graphs_captured_after_it(hf, monkeypatch, tmp_path):
    """With timing on (after the Generator is built) and nothing tuned yet, the prefill's
    products time their candidates (autotune.searches_run moves); the decode graphs are
    then captured again and decode as transformers does."""
    model = Llama.from_hf(hf, device="cuda")
    generator = tg.Generator(model, max_batch=1, max_seq=48, sizes=(1,))
    before, searches = generator._runner(sampled=False), autotune.searches_run()
    monkeypatch.setenv("TILEGRAPH_AUTOTUNE", "1")
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(matmul._tuner, "_memo", {})
    prompt = torch.randint(1, 67, (40,)).tolist()   # 40 rows: the prefill's tiled products
    assert generator.generate([prompt], 8) == [_hf_greedy(hf, prompt, 8)]
    assert autotune.searches_run() > searches and generator._runner(sampled=False) is not before


@pytest.mark.gpu
def test_attention_launch_is_chosen_in_the_decode_step(hf, monkeypatch):
    """With timing on, each batch size's attention launch is timed in the model's own step
    among the rule and step_candidates' variants (none timed alone first, each compiled
    before any step is captured), recorded for its step, and the graphs decode with it as
    transformers does."""
    monkeypatch.setenv("TILEGRAPH_AUTOTUNE", "1")
    monkeypatch.setattr(attention.tuned, "_memo", {})
    monkeypatch.setattr(tune.attention_in_step, "_memo", {})
    # the candidates' kernels are compiled (side by side) before their steps are captured
    kernel, index = attention._decode_attention_kernel, torch.cuda.current_device()
    compiled_in_steps = []
    timed = tune.time_step_candidates

    def counting(*args, **kwargs):
        before = len(kernel.device_caches[index][0])
        result = timed(*args, **kwargs)
        compiled_in_steps.append(len(kernel.device_caches[index][0]) - before)
        return result
    monkeypatch.setattr(tune, "time_step_candidates", counting)
    model = Llama.from_hf(hf, device="cuda")
    said = []
    # one context band: a cache shorter than attention reads before its wait
    generator = tg.Generator(model, max_batch=2, max_seq=250, sizes=(1, 2),
                             progress=said.append)
    assert generator.bands == (250,)
    assert compiled_in_steps and not any(compiled_in_steps)
    assert not any(what.startswith("choosing decode attention's launch") for what in said)
    assert said.index("choosing attention's launch in the batch-2 step") < said.index(
        "capturing the greedy decode graphs, batch 1, 2")
    c = model.local
    for size in (1, 2):
        shape = (size, c.n_kv_heads, c.n_heads // c.n_kv_heads, c.head_dim, 250)
        key = attention.attention_key(*shape, model.dtype)
        chosen = tune.attention_in_step.lookup((*key, c.dim, c.ffn_dim, c.n_layers,
                                                c.vocab_size))
        sms = sm_count(model.device)
        rule = attention.attention_config(*shape, sms, **attention.device_facts(
            model.dtype, model.device))
        assert chosen is not None and attention.tuned.lookup(key) == chosen
        assert chosen in attention.step_candidates(*shape, sms, rule)
    prompt = torch.randint(0, 67, (11,)).tolist()
    assert generator.generate([prompt], 16) == [_hf_greedy(hf, prompt, 16)]


@pytest.mark.gpu
@pytest.mark.parametrize("sizes", [(2,), (3, 4)])
def test_tuned_projection_plans_are_checked_in_the_decode_step(hf, monkeypatch, sizes):
    """With timing on, a projection whose `tilegraph tune` plan differs from the rule's (here
    another of tune's candidates) is timed in the model's step against the rule's, the choice
    recorded for the step, and the graphs decode as transformers does with it. Steps of 3
    and 4 rows share the tuned plan (one rows bucket) and each keeps its own choice."""
    monkeypatch.setenv("TILEGRAPH_AUTOTUNE", "1")
    for store in (decode_plan._tuned, decode_plan._step_rule, tune.tuned_plans_in_step):
        monkeypatch.setattr(store, "_memo", {})
    model = Llama.from_hf(hf, device="cuda")
    layer, c = model.layers[0], model.local
    qkv, sms, rows = tuple(layer.wqkv.shape), sm_count(model.device), max(sizes)
    rules = {size: decode_plan.rule(size, *qkv, model.dtype, sms) for size in sizes}
    tuned = next(p for p in decode_plan.candidates(rows, *qkv, model.dtype, sms)
                 if p.kind != "gemv" and p not in rules.values())
    decode_plan.record(rows, *qkv, model.dtype, tuned)
    said = []
    generator = tg.Generator(model, max_batch=rows, max_seq=48, sizes=sizes,
                             progress=said.append)
    for size in sizes:
        assert f"checking the tuned plans of q|k|v in the batch-{size} step" in said
        chosen = tune.tuned_plans_in_step.lookup((size, c.n_heads, c.n_kv_heads, c.head_dim,
                                                  48, str(model.dtype), c.dim, c.ffn_dim,
                                                  c.n_layers, c.vocab_size))
        assert chosen is not None and chosen["rule"] in ([], ["q|k|v"])
        assert decode_plan.plan(size, *qkv, model.dtype, model.device) == (
            rules[size] if chosen["rule"] else tuned)
    prompts = [torch.randint(0, 67, (n,)).tolist() for n in (5, 9)]
    assert generator.generate(prompts, 8) == [_hf_greedy(hf, p, 8) for p in prompts]


@pytest.mark.gpu
def test_whole_slice_tiles_decode_as_hf_with_their_k_loop_left_out(hf, monkeypatch):
    """At 16 rows every projection of the tiny model is a whole-slice tensor-core tile: with
    timing on, the step is timed with their K loops left out and the choice recorded; graphs
    built where the step chose to leave every loop out run those plans and decode as
    transformers does."""
    monkeypatch.setenv("TILEGRAPH_AUTOTUNE", "1")
    for store in (decode_plan._one_step, tune.one_step_in_step):
        monkeypatch.setattr(store, "_memo", {})
    model = Llama.from_hf(hf, device="cuda")
    layer, c = model.layers[0], model.local
    said = []
    tg.Generator(model, max_batch=16, max_seq=48, sizes=(16,), progress=said.append)
    names = ["q|k|v", "output", "gate/up", "down", "LM head"]
    assert (f"timing the K loop of {', '.join(names)} left out in the batch-16 step"
            in said)
    key = (16, c.n_heads, c.n_kv_heads, c.head_dim, 48, str(model.dtype), c.dim, c.ffn_dim,
           c.n_layers, c.vocab_size)
    assert tune.one_step_in_step.lookup(key) is not None
    tune.one_step_in_step.record(key, {"one_step": names})
    generator = tg.Generator(model, max_batch=16, max_seq=48, sizes=(16,))
    for weight in (layer.wqkv, layer.wo, layer.w_gate_up, layer.w_down, model.lm_head):
        chosen = decode_plan.plan(16, *weight.shape, model.dtype, model.device)
        assert chosen.kind == "dot" and chosen.config.get("ONE_STEP")
    prompts = [torch.randint(0, 67, (n,)).tolist() for n in (5, 9)]
    assert generator.generate(prompts, 8) == [_hf_greedy(hf, p, 8) for p in prompts]


def test_progress_says_what_the_build_runs(hf):
    """The progress callback hears each part of a Generator's build as it starts: the graphs'
    capture last, the sampling graphs' when a call first samples, and on CUDA a prefill
    graph's when a call first prefills its shape."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    said = []
    generator = tg.Generator(Llama.from_hf(hf, device=device), max_batch=2, max_seq=48,
                             sizes=(2,), progress=said.append)
    assert said[-1] == "capturing the greedy decode graphs, batch 2"
    built = len(said)
    generator.generate([[3, 4, 5]], 2, temperature=1.0, seed=1)
    # on CUDA prefills replay graphs, one per (prompts, padded length), captured when new
    graphs = device == "cuda"
    assert said[built:] == ["capturing the sampling decode graphs, batch 2",
                            *["capturing the prefill of 1 prompt padded to 4 tokens"] * graphs]
    built = len(said)
    generator.generate([[3, 4, 5, 6], [7]], 2)
    assert said[built:] == ["capturing the prefill of 2 prompts padded to 4 tokens"] * graphs


def _chosen_in_a_batch_1_step(hf, monkeypatch, store):
    """A bf16 model and the choice `store` holds for its batch-1 step once a Generator (of
    cache 300) has tuned it with timing on, the store emptied first."""
    monkeypatch.setenv("TILEGRAPH_AUTOTUNE", "1")
    monkeypatch.setattr(store, "_memo", {})
    model = Llama.from_hf(hf, dtype=torch.bfloat16, device="cuda")
    tg.Generator(model, max_batch=1, max_seq=300, sizes=(1,))
    return model, store.lookup(_batch_1_step_key(model))


def _batch_1_step_key(model):
    """The key of a model's batch-1 step in a Generator of cache 300 (the step tuners')."""
    c = model.local
    return (c.n_heads, c.n_kv_heads, c.head_dim, 300, str(model.dtype), c.dim, c.ffn_dim,
            c.n_layers, c.vocab_size)


@pytest.mark.gpu
def test_release_points_are_chosen_in_the_batch_1_step(hf, monkeypatch):
    """With timing on, where the batch-1 step's one-row output and gate/up projections
    release the next kernel is chosen by timing the step and recorded for it and per shape;
    released late or not, the step's logits are the same bit for bit over 60 replays with
    fresh tokens and positions."""
    model, chosen = _chosen_in_a_batch_1_step(hf, monkeypatch, tune.release_in_step)
    layer = model.layers[0]
    shapes = {"output": tuple(layer.wo.shape), "gate/up": tuple(layer.w_gate_up.shape)}
    assert chosen is not None and set(chosen["late"]) <= set(shapes)
    for name, shape in shapes.items():
        assert decode_plan.releases_late(*shape, model.dtype) == (name in chosen["late"])
    steps = []
    for late in (False, True):
        for shape in shapes.values():
            decode_plan.set_late_release(*shape, model.dtype, late)
        steps.append(_replayed_logits(model))
    assert torch.isfinite(steps[0]).all() and torch.equal(steps[0], steps[1])


def _replayed_logits(model, replays=60):
    """The logits of `replays` replays of one captured batch-1 step of `model` over a cache
    of 300 positions, each replay with a fresh token and position."""
    cache = model.new_cache(1, 300)
    tokens = torch.zeros(1, dtype=torch.int64, device="cuda")
    positions = torch.zeros_like(tokens)
    graph = tg.capture(model.decode, tokens, positions, cache, restore_state=False)
    logits = []
    for i in range(replays):
        tokens.fill_((7 * i) % model.local.vocab_size)
        positions.fill_(i)
        logits.append(graph.replay().clone())
    return torch.stack(logits)


def test_the_l2_prefetch_is_chosen_band_by_band_until_one_takes_none(hf, monkeypatch):
    """Generator._tune_l2_ahead asks each context band's step, the shortest first, over the
    band's own window and positions, what the output projection prefetches (each band's
    amount applied to that band alone), and stops at the first band that takes none."""
    model = Llama.from_hf(hf)
    cache = model.new_cache(1, 2048)
    bands = (256, 384, 1536, 2048)
    generator = type("Generator", (), {})()   # the parts _tune_l2_ahead reads
    generator.model, generator.bands, generator._progress = model, bands, lambda what: None
    generator._windows = {band: cache.window(band) for band in bands}
    taken = {256: 4 * 2**20, 384: 2**20, 1536: 0, 2048: 8 * 2**20}
    asked = []

    def choose(step, projection, ahead_bytes, dtype, apply, capture_step, positions, max_seq,
               tolerance, shortest, reference, run_step):
        for part in (capture_step, reference, run_step):
            assert part.keywords == {"cache": generator._windows[max_seq]}
        asked.append((max_seq, shortest))
        apply(taken[max_seq])
        return taken[max_seq]
    monkeypatch.setattr(generate, "tune_l2_ahead_in_step_once", choose)

    def step(cache):   # a stand-in for the steps the partials wrap
        raise AssertionError("no step runs here")
    generate.Generator._tune_l2_ahead(generator, ("a step",), step, step, step,
                                      torch.zeros(1, dtype=torch.int64), 2e-2)
    assert asked == [(256, 0), (384, 256), (1536, 384)]
    assert model.l2_ahead_bytes == {256: 4 * 2**20, 384: 2**20, 1536: 0}


@pytest.mark.gpu
def test_the_l2_prefetch_beside_attention_is_chosen_per_band_in_the_batch_1_step(
        hf, monkeypatch):
    """With timing on, a Generator chooses for each context band, the shortest first, how
    much of gate/up's weights the batch-1 step's output projection prefetches into L2, among
    the amounts tried, and the model holds it per band (none past the first band that takes
    none); with a prefetch or none, the step's logits are the same bit for bit over 60
    replays with fresh tokens and positions."""
    model, _ = _chosen_in_a_batch_1_step(hf, monkeypatch, tune.l2_ahead_in_step)
    layer = model.layers[0]
    gate_up = layer.w_gate_up.numel() * layer.w_gate_up.element_size()
    bands = generate.context_bands(300, model.config.head_dim)
    chosen = [model.l2_ahead_bytes.get(band, 0) for band in bands]
    first = tune.l2_ahead_in_step.lookup((*_batch_1_step_key(model), bands[0], "from 0"))
    assert first is not None and chosen[0] == first["bytes"]
    assert set(chosen) <= {min(n, gate_up) for n in tune.L2_AHEAD_BYTES}
    assert set(model.l2_ahead_bytes) <= set(bands)
    none_from = chosen.index(0) if 0 in chosen else len(chosen)
    assert not any(chosen[none_from:])
    steps = []
    for nbytes in (0, gate_up):
        model.l2_ahead_bytes = {300: nbytes}
        steps.append(_replayed_logits(model))
    assert torch.isfinite(steps[0]).all() and torch.equal(steps[0], steps[1])


@pytest.mark.gpu
def test_projection_variants_compile_before_their_steps_are_captured(hf, monkeypatch):
    """The batch-1 step's projection variants (rows a program, release points) are compiled
    side by side before the steps timing them are captured: no one-row kernel compiles in
    those captures."""
    monkeypatch.setenv("TILEGRAPH_AUTOTUNE", "1")
    for store in (tune.gemv_rows_in_step, tune.release_in_step):
        monkeypatch.setattr(store, "_memo", {})
    kernels = (_matvec._gemv_kernel, _matvec._gemv_rows_kernel, _matvec._matvec_kernel)
    index = torch.cuda.current_device()

    def compiled() -> int:
        return sum(len(kernel.device_caches[index][0]) for kernel in kernels)
    said, compiled_in_captures = [], []
    captured = generate.capture

    def counting(*args, **kwargs):
        before = compiled()
        graph = captured(*args, **kwargs)
        if "choosing the batch-1 step's projection launches" in said:
            compiled_in_captures.append(compiled() - before)
        return graph
    monkeypatch.setattr(generate, "capture", counting)
    model = Llama.from_hf(hf, dtype=torch.bfloat16, device="cuda")
    tg.Generator(model, max_batch=1, max_seq=300, sizes=(1,), progress=said.append)
    assert len(compiled_in_captures) >= 3 and not any(compiled_in_captures)


@pytest.mark.gpu
def test_gemv_rows_are_chosen_in_the_batch_1_step(hf, monkeypatch):
    """With timing on, the rows a program of the batch-1 step's one-row projections are
    chosen by timing the step and recorded for it and per shape; with every variant the
    tuner may take (rows a program, the other launch, small tiles), the step's logits match
    those with the plans' own rows over 20 replays with fresh tokens and positions."""
    model, chosen = _chosen_in_a_batch_1_step(hf, monkeypatch, tune.gemv_rows_in_step)
    shapes = _step_projection_shapes(model)
    assert chosen is not None and set(chosen["rows"]) <= set(shapes)
    for name, (shape, _) in shapes.items():
        assert decode_plan.step_rows(*shape, model.dtype) == chosen["rows"].get(name)
    _every_step_variant_gives_the_step_logits(model, shapes)


def _step_projection_shapes(model) -> dict:
    """The batch-1 step's one-row projections: name -> (weight shape, pairs)."""
    layer = model.layers[0]
    return {"q|k|v": (tuple(layer.wqkv.shape), True), "output": (tuple(layer.wo.shape), False),
            "gate/up": (tuple(layer.w_gate_up.shape), True),
            "down": (tuple(layer.w_down.shape), False)}


def _every_step_variant_gives_the_step_logits(model, shapes: dict) -> None:
    """With each step variant of each projection (`shapes`: name -> (weight shape, pairs)),
    the batch-1 step's logits match those with the plans' own over 20 replays with fresh
    tokens and positions."""
    cache = model.new_cache(1, 300)
    tokens = torch.zeros(1, dtype=torch.int64, device="cuda")
    positions = torch.zeros_like(tokens)

    def logits() -> torch.Tensor:
        graph = tg.capture(model.decode, tokens, positions, cache, restore_state=False)
        replays = []
        for i in range(20):
            tokens.fill_((5 * i + 3) % model.local.vocab_size)
            positions.fill_(2 * i)
            replays.append(graph.replay().clone())
        return torch.stack(replays)

    for shape, _ in shapes.values():
        decode_plan.set_step_rows(*shape, model.dtype, None)
    own = logits()
    assert torch.isfinite(own).all()
    for name, (shape, pairs) in shapes.items():
        own_plan = decode_plan.plan(1, *shape, model.dtype, model.device)
        assert own_plan.kind == "gemv"
        for rows in decode_plan.step_variants(*shape, model.dtype, own_plan.config, pairs):
            decode_plan.set_step_rows(*shape, model.dtype, rows)
            assert rel_error(logits(), own) <= MODEL_TOLERANCES[model.dtype], (name, rows)
        decode_plan.set_step_rows(*shape, model.dtype, None)


@pytest.mark.gpu
def test_small_tiles_give_a_short_row_step_its_logits(monkeypatch):
    """A layer of Qwen2-0.5B's shape (rows of 896 columns, q|k|v with bias): SMALL_LAUNCH is
    offered to its q|k|v, output and gate/up projections, and with it, as with every other
    variant, the step's logits are those of the plans' own."""
    monkeypatch.setattr(decode_plan._step_rows, "_memo", {})
    monkeypatch.setattr(decode_plan._step_rows, "_disk_loaded", True)
    hf = random_hf_model("qwen2-0.5b", num_hidden_layers=1, vocab_size=1000)
    model = Llama.from_hf(hf, dtype=torch.bfloat16, device="cuda")
    shapes = _step_projection_shapes(model)
    offered = {name for name, (shape, _) in shapes.items()
               if decode_plan.in_small_band(*shape, model.dtype)}
    assert offered == {"q|k|v", "output", "gate/up"}
    _every_step_variant_gives_the_step_logits(model, shapes)


@pytest.mark.gpu
def test_decoding_allocates_no_device_memory(generator):
    """After the prefill the decode loop allocates nothing (its buffers are made once): the
    host never asks an allocator for memory while steps run."""
    stream = generator.stream([[1, 2, 3], [4, 5]], 17)   # chunks of 5, the last one of 1
    next(stream)
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    assert len(list(stream)) == 16
    assert torch.cuda.memory_stats()["allocation.all.allocated"] == before


def test_stream_yields_one_list_per_step(generator):
    prompts = [[1, 2, 3], [4, 5, 6]]
    steps = list(generator.stream(prompts, 7))
    assert len(steps) == 7 and all(len(s) == 2 for s in steps)
    assert [list(row) for row in zip(*steps, strict=True)] == generator.generate(prompts, 7)


def test_score_gives_the_graphs_logits_teacher_forced(hf, generator):
    prompts = torch.randint(0, 67, (2, 5))
    continuation = torch.randint(0, 67, (2, 4))
    logits = generator.score(prompts, continuation.to(generator.model.device))
    with torch.no_grad():
        ref = hf(torch.cat([prompts, continuation], dim=1)).logits[:, 4:8]
    for t in range(4):
        assert rel_error(logits[:, t], ref[:, t]) <= MODEL_TOLERANCES[torch.float32]


def test_sampling_is_seeded_and_top_k_1_is_greedy(generator):
    prompts = [[5, 9, 2, 11], [5, 9, 2, 11]]
    first = generator.generate(prompts, 4, temperature=1.5, seed=7)
    assert generator.generate(prompts, 4, temperature=1.5, seed=7) == first
    assert generator.generate(prompts, 4, temperature=1.5, seed=8) != first
    assert first[0] != first[1], "rows of one batch draw independently"
    greedy = generator.generate(prompts, 4)
    assert generator.generate(prompts, 4, temperature=1.5, top_k=1, seed=3) == greedy
    assert generator.generate(prompts[:1], 4, temperature=1.5, top_p=1e-6) == greedy[:1]


def test_requests_beyond_capacity_fail_before_any_work(generator):
    with pytest.raises(ValueError, match="max_batch=3"):
        generator.generate([[1]] * 4, 2)
    with pytest.raises(ValueError, match="exceeds max_seq=48"):
        generator.generate([[1] * 40], 9)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generator.generate([[1]], 0)
    with pytest.raises(ValueError, match=r"\[0, 67\)"):
        generator.generate([[1, 67]], 2)
    with pytest.raises(ValueError, match="at least one token"):
        generator.generate([[]], 2)
    with pytest.raises(ValueError, match="temperature > 0"):
        generator.generate([[1]], 2, top_k=5)
    with pytest.raises(ValueError, match="top_p"):
        generator.generate([[1]], 2, temperature=1.0, top_p=1.5)
    with pytest.raises(TypeError, match="token ids"):
        generator.generate(torch.ones(1, 3), 2)
    with pytest.raises(TypeError, match="token ids must be integers, got 1.5"):
        generator.generate([[2, 1.5]], 2)   # not cut to 1
    with pytest.raises(TypeError, match="token ids"):
        generator.generate([torch.tensor([2.0, 3.0])], 2)
    with pytest.raises(ValueError, match="at least one prompt"):
        generator.generate([], 2)
    # score's continuation is read on the device: a wrong id would give NaN logits
    with pytest.raises(ValueError, match=r"continuation ids must lie in \[0, 67\)"):
        generator.score([[1, 2]], torch.tensor([[-1, 3]]))
    with pytest.raises(ValueError, match="integer ids"):
        generator.score([[1, 2]], torch.tensor([[1.5, 3.0]]))


def test_prompts_as_tensors_of_their_own_lengths_decode_as_lists(generator):
    prompts = [[5, 9, 2, 11], [7, 3]]
    as_tensors = [torch.tensor(prompts[0]), torch.tensor(prompts[1], dtype=torch.int32)]
    assert generator.generate(as_tensors, 4) == generator.generate(prompts, 4)


def test_generator_refuses_other_models():
    with pytest.raises(TypeError, match="Llama"):
        tg.Generator(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("sizes", [(2.5,), ("a",), (0, 2), (True,)])
def test_generator_refuses_sizes_that_are_not_batch_sizes(hf, sizes):
    model = Llama.from_hf(hf)
    with pytest.raises(ValueError, match="sizes must be positive ints"):
        tg.Generator(model, max_batch=2, max_seq=16, sizes=sizes)


# -- sampling alone ------------------------------------------------------------------------

def test_samples_follow_the_softmax():
    """20,000 draws of one row (a fresh position each) land on each token about as often as
    its probability says (5 standard deviations of a binomial count)."""
    logits = torch.tensor([2.0, 1.0, 0.5, -1.0, -3.0])
    draws = 20000
    tokens = sampling.sample(logits.expand(draws, -1), torch.full((draws,), 1.0),
                             torch.zeros(draws, dtype=torch.int64), torch.ones(draws),
                             torch.full((draws,), 3, dtype=torch.int64), torch.arange(draws))
    counts = torch.bincount(tokens, minlength=5).double()
    expected = torch.softmax(logits.double(), 0) * draws
    spread = (expected * (1 - expected / draws)).sqrt()
    assert ((counts - expected).abs() <= 5 * spread + 1).all(), (counts, expected)


def test_top_k_and_top_p_restrict_the_draws():
    logits = torch.tensor([3.0, 2.5, 2.0, 0.0, -1.0])   # probs ~ .50 .30 .18 .02 .01
    draws = 4000
    row = lambda value, dtype=torch.float32: torch.full((draws,), value, dtype=dtype)  # noqa: E731
    seeds, positions = row(1, torch.int64), torch.arange(draws)
    top2 = sampling.sample(logits.expand(draws, -1), row(1.0), row(2, torch.int64), row(1.0),
                           seeds, positions)
    assert set(top2.tolist()) == {0, 1}
    nucleus = sampling.sample(logits.expand(draws, -1), row(1.0), row(0, torch.int64),
                              row(0.7), seeds, positions)
    assert set(nucleus.tolist()) == {0, 1}   # 0.50 < 0.7: the second joins, the third not


def test_noise_is_uniform_and_decorrelated():
    u = sampling.uniform_noise(torch.tensor(5), torch.arange(100000), torch.tensor(3))
    assert 0 < u.min() and u.max() < 1
    assert abs(u.mean().item() - 0.5) < 0.01 and abs(u.var().item() - 1 / 12) < 0.005
    seeds = sampling.row_seeds(5, 4)
    assert len(set(seeds.tolist())) == 4


@pytest.mark.parametrize("name", ["tiny-qwen3", "tiny-phi3", "tiny-granite", "tiny-granite-swa",
                                  "tiny-smollm3",
                                  "tiny-glm", "tiny-exaone4", "tiny-olmo2", "tiny-olmo3",
                                  "tiny-hunyuan", "tiny-ministral3", "tiny-arcee", "tiny-apertus",
                                  "tiny-apertus1p5", "tiny-persimmon",
                                  "tiny-nanochat", "tiny-hyperclovax", "tiny-starcoder2",
                                  "tiny-phi", "tiny-gpt_neox", "tiny-gptj", "tiny-codegen",
                                  "tiny-falcon-mq",
                                  "tiny-gpt2", "tiny-opt", "tiny-opt-350m", "tiny-biogpt",
                                  "tiny-xglm", "tiny-openai-gpt",
                                  "tiny-gpt_bigcode", "tiny-gpt_neo",
                                  "tiny-bloom", "tiny-mpt", "tiny-falcon-rw", "tiny-gemma2",
                                  "tiny-vaultgemma", "tiny-gemma3", "tiny-mixtral",
                                  "tiny-qwen2-moe", "tiny-qwen3-moe", "tiny-olmoe",
                                  "tiny-granitemoe", "tiny-granitemoe-shared",
                                  "tiny-gpt-oss", "tiny-minimax-m2", "tiny-solar-open",
                                  "tiny-hunyuan-moe"])
def test_greedy_tokens_equal_hf_per_family(name):
    """Qwen3's norms of each q and k head (a head_dim of 12 over a width of 32), Phi-3's
    stacked checkpoint matrices and sliding window, Granite's scalars (Granite SWA's with
    attention sinks, a base a layer and sliding layers), SmolLM3's layer
    without rotary embeddings, GLM's half-turned heads paired by neighbours, EXAONE 4's
    layers with norms only after attention and the MLP, OLMo 2's norms of all of q and all
    of k (OLMo 3's two layers: one sliding, one full with YaRN), Hunyuan's head norms after
    the rotation, Ministral 3's q scaled past its pretrained context of 16 positions (the
    steps past it), Arcee's ungated MLP, NanoChat's normalised embeddings, rotation the
    other way and capped logits, HyperCLOVA X's scalars and norms after attention and the
    MLP, StarCoder2's LayerNorms, Phi's, GPT-NeoX's and GPT-J's parallel layers, GPT-2's,
    OPT's and GPT-BigCode's learned positions (added by each greedy step; GPT-Neo's with a
    local layer of 7 positions beside a global one), OPT 350M's norms after the residual
    adds and projection down to its head (the first GPT's norms after the adds, its Conv1D
    weights), BioGPT's scaled embeddings, XGLM's sinusoidal
    positions, Falcon-RW's ALiBi rounded to bf16, Gemma's gated GELU,
    norms after attention and the MLP and sliding layer (a window of 7 positions, which the
    longer prompt passes and the shorter one while it decodes), Gemma 2's softcapped scores
    and logits (VaultGemma's without norms after attention and the MLP), Gemma 3's local
    rotary base, the mixtures of experts (Mixtral's, Qwen 2 MoE's with its shared
    expert, Qwen 3 MoE's, OLMoE's, Granite MoE's, with a shared MLP (Granite MoE SWA's,
    its attention Granite SWA's, in test_llama's), GPT-OSS's with its biases, clamped
    SwiGLU, sinks, YaRN and a sliding layer, MiniMax-M2's weighted by sigmoids and chosen
    with a bias, Solar Open's scaled beside a shared expert, Hunyuan's MoE with its shared
    MLP: a row's experts chosen in the graph), through
    the Generator's graphs: 8 greedy tokens, transformers' at batch 1 and 2 (Gemma's, OLMo
    3's and EXAONE 4's two layers, a sliding one and a global one, Granite SWA's four; the
    others' first)."""
    every_layer = name.startswith("tiny-gemma") or name in ("tiny-exaone4", "tiny-olmo3",
                                                            "tiny-granite-swa")
    layers = ({"sliding_window": 7} if every_layer else
              {} if name == "tiny-gpt_neo" else {"num_hidden_layers": 1})
    # no end token, which transformers' generate would hold back until min_new_tokens
    hf = random_hf_model(name, scale=5.0, eos_token_id=None, **layers)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    generator = tg.Generator(Llama.from_hf(hf, device=device), max_batch=2, max_seq=24,
                             sizes=(1, 2), sync_every=4)
    prompts = [torch.randint(0, 67, (n,)).tolist() for n in (6, 9)]
    new = 8
    expected = [_hf_greedy(hf, p, new) for p in prompts]
    assert generator.generate(prompts[:1], new) == expected[:1]
    assert generator.generate(prompts, new) == expected


def test_greedy_tokens_past_a_sliding_window_equal_hf():
    """Phi-3 with a window of 7 positions: prompts of 5 and 9 tokens and 20 new ones, so the
    window slides past the prompt in every step after the first few; the Generator's greedy
    tokens are transformers'."""
    hf = random_hf_model("tiny-phi3", scale=5.0, num_hidden_layers=1, sliding_window=7)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    generator = tg.Generator(Llama.from_hf(hf, device=device), max_batch=2, max_seq=32,
                             sizes=(2,), sync_every=4)
    prompts = [torch.randint(0, 67, (n,)).tolist() for n in (5, 9)]
    assert generator.generate(prompts, 20) == [_hf_greedy(hf, p, 20) for p in prompts]


def test_greedy_tokens_with_longrope_equal_hf_through_its_cache():
    """LongRoPE at a pretrained context of 16 (Phi-3's 128k checkpoints): prompts of 9 and
    18 tokens (short and long factors), 20 new tokens each, so the first crosses the context
    while it decodes; the Generator's greedy tokens are transformers' model's, decoding a
    token at a time through its cache. (transformers' generate() instead drops its cache the
    first time a sequence passes the context and recomputes it by the long factors.)"""
    from test_llama import LONGROPE

    hf = random_hf_model("tiny-phi3", scale=5.0, num_hidden_layers=1, **LONGROPE)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    generator = tg.Generator(Llama.from_hf(hf, device=device), max_batch=1, max_seq=48,
                             sizes=(1,), sync_every=4)
    for length in (9, 18):
        prompt = torch.randint(0, 67, (length,)).tolist()
        with torch.no_grad():
            out = hf(torch.tensor([prompt]), use_cache=True)
            expected = [int(out.logits[0, -1].argmax())]
            for _ in range(19):
                out = hf_next(hf, torch.tensor([expected[-1:]]), out)
                expected.append(int(out.logits[0, -1].argmax()))
        assert generator.generate([prompt], 20) == [expected], length


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["qwen2-0.5b", "qwen3-0.6b", "phi3-mini", "gemma3-1b",
                                  "gemma2-2b"])
def test_real_shape_greedy_tokens_equal_hf_in_fp32(name):
    """Qwen2-0.5B's, Qwen3-0.6B's, Phi-3-mini's, Gemma 3 1B's and Gemma 2 2B's shapes
    (head_dim 64, 128, 96, 256, 256; Gemma 2's scores and logits softcapped) in fp32:
    the graphs' greedy tokens are transformers' for 24 new tokens, at batch 1 and at batch 3
    (a padded bucket of 4)."""
    hf = random_hf_model(name, device="cuda", scale=3.0)
    generator = tg.Generator(Llama.from_hf(hf), max_batch=4, max_seq=64, sizes=(1, 4))
    prompts = torch.randint(0, hf.config.vocab_size, (3, 13), device="cuda")
    expected = hf.generate(prompts, attention_mask=torch.ones_like(prompts), do_sample=False,
                           max_new_tokens=24, min_new_tokens=24, pad_token_id=0)[:, 13:]
    assert generator.generate(prompts[:1], 24) == expected[:1].tolist()
    assert generator.generate(prompts, 24) == expected.tolist()
