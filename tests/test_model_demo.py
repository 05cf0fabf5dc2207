"""The model demo's decode harness (model_demo.GreedyDecoder), off any model."""

import copy
from types import SimpleNamespace

import pytest
import torch

from tilegraph.model_demo import (
    INTERPRETER_MAX_PARAMETERS,
    DemoModel,
    GreedyDecoder,
    memory_shortfall,
    reference_logits,
)
from tilegraph.models import LlamaConfig
from tilegraph.models.hf_presets import hf_config, random_hf_model


class StaticOutputDecoder(GreedyDecoder):
    """A step that writes its logits into one buffer and returns it, as a captured CUDA graph
    replays into its static output: logits[b, v] = 1 + ids[b] * v + position."""

    def __init__(self, batch: int, vocab: int, dtype: torch.dtype, device: str = "cpu"):
        super().__init__(batch, torch.device(device))
        self.columns = torch.arange(vocab, dtype=dtype, device=device)
        self.logits = torch.empty(batch, vocab, dtype=dtype, device=device)

    def step(self) -> torch.Tensor:
        torch.add(self.ids.to(self.logits.dtype) * self.columns + self.position, 1,
                  out=self.logits)
        return self.logits

    def _prefill(self, prompts: torch.Tensor) -> torch.Tensor:
        self.position.fill_(prompts.shape[1])
        return torch.zeros_like(self.logits)


def test_score_keeps_every_step_of_a_step_with_one_output_buffer():
    # fp32 where .float() returns the buffer itself: session 103 found every hf-graph step
    # scored as the last replay's logits in fp32, while bf16 (copied by .float()) passed
    for dtype in (torch.float32, torch.bfloat16):
        decoder = StaticOutputDecoder(batch=3, vocab=7, dtype=dtype)
        prompts = torch.randint(0, 7, (3, 5))
        continuation = torch.randint(1, 7, (3, 4))
        logits = decoder.score(prompts, continuation, decoder.step)
        assert logits.shape == (3, 4, 7) and logits.dtype == torch.float32
        columns = torch.arange(7, dtype=torch.float32)
        for i in range(1, 4):
            expected = continuation[:, i - 1:i].float() * columns + 5 + (i - 1) + 1
            torch.testing.assert_close(logits[:, i], expected, rtol=0, atol=0)


def test_the_fp32_reference_is_a_copy_s_and_leaves_the_model_as_it_was():
    """The reference logits equal an fp32 copy's of the 16-bit model, computed on the
    model itself (no copy: its weights upcast in place), which keeps its dtypes and its
    values bit for bit; the rounding errors are the model's own against them."""
    hf = random_hf_model("tiny-llama3").to(torch.bfloat16)
    before = {name: t.clone() for name, t in hf.state_dict().items()}
    prompts, continuation = torch.randint(0, 64, (2, 5)), torch.randint(0, 64, (2, 3))
    reference, rounding = reference_logits(hf, prompts, continuation)
    ids = torch.cat([prompts, continuation], 1)
    with torch.no_grad():
        expected = copy.deepcopy(hf).float()(ids).logits[:, 4:7]
    assert reference.dtype == torch.float32 and torch.equal(reference, expected)
    assert len(rounding) == 3 and all(error > 0 for error in rounding)
    for name, t in hf.state_dict().items():
        assert t.dtype == before[name].dtype and torch.equal(t, before[name]), name


def test_a_model_whose_two_copies_pass_the_free_memory_is_refused_with_the_sizes():
    """The demo holds transformers' weights and tilegraph's: GPT-OSS 20B's 20.9B parameters
    in bf16 need 83.7 GB, more than an H100's 80; an H200's 140 hold them, and fp32 doubles
    the need."""
    config = LlamaConfig.from_hf(hf_config("gpt-oss-20b"))
    short = memory_shortfall(config, torch.bfloat16, 79 * 10**9)
    assert short is not None and "83.7 GB" in short and "79.0 GB" in short
    assert memory_shortfall(config, torch.bfloat16, 140 * 10**9) is None
    assert memory_shortfall(config, torch.float32, 140 * 10**9) is not None


def test_demo_model_is_a_shape_or_a_checkpoint_directory(tmp_path):
    pytest.importorskip("transformers")
    saved = random_hf_model("tiny-llama3", seed=7, scale=2.0)
    checkpoint = tmp_path / "my-llama"
    saved.save_pretrained(checkpoint)
    loaded = DemoModel(str(checkpoint)).load(torch.float32, "cpu")
    assert DemoModel(str(checkpoint)).label == "my-llama"
    assert DemoModel(str(checkpoint)).source == f"weights from {checkpoint}"
    for name, tensor in saved.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], tensor, rtol=0, atol=0)

    # a config alone: random weights of that config, not the checkpoint's
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text((checkpoint / "config.json").read_text())
    random = DemoModel(str(bare)).load(torch.float32, "cpu")
    assert DemoModel(str(bare)).source.startswith("random weights of")
    assert random.config.hidden_size == saved.config.hidden_size
    assert not torch.equal(random.state_dict()["lm_head.weight"],
                           saved.state_dict()["lm_head.weight"])

    assert DemoModel("tiny-qwen2").path is None and DemoModel("tiny-qwen2").problem() is None
    assert "neither a named shape" in DemoModel(str(tmp_path / "missing")).problem()
    # what the interpreter is allowed to decode on CPU
    assert DemoModel("tiny-mistral").llama_config().parameter_count() < \
        INTERPRETER_MAX_PARAMETERS
    assert DemoModel("tinyllama").llama_config().parameter_count() > 1_000_000_000


def test_the_floor_counts_each_layer_s_window_of_the_cache():
    """% of the floor: the weights and the KV bytes a step reads, for a sliding layer only
    its window's (a floor counting the whole context would flatter a windowed model)."""
    from tilegraph.model_demo import ModelRun, summarize
    from tilegraph.models import LlamaConfig

    shape = dict(vocab_size=100, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=96)
    whole, windowed = LlamaConfig(**shape), LlamaConfig(**shape, sliding_window=100)
    runs = [ModelRun("tilegraph", ms_per_token=1.0)]
    rows = {name: summarize("m", 2, runs, config, 2, 1000.0, 1.0)[0]["pct_floor"]
            for name, config in (("whole", whole), ("windowed", windowed))}
    weights = whole.decode_bytes(2)
    kv_position = 2 * whole.kv_dim * 2 * 2 * whole.n_layers   # k and v, 2 bytes, batch 2
    assert rows["whole"] == pytest.approx(100 * (weights + kv_position * 1000) / 1e6)
    assert rows["windowed"] == pytest.approx(100 * (weights + kv_position * 100) / 1e6)


@pytest.mark.parametrize("name", ["tiny-gemma2", "tiny-phi3"])
@pytest.mark.parametrize("window", [64, 8])
@pytest.mark.parametrize("masks_on_device", [False, True])
def test_hf_peers_cache_every_position_in_full_layers(name, window, masks_on_device):
    """transformers' peers decode over a StaticCache of full layers (its sliding layers
    count on the host, which a captured step freezes), with transformers' masks or the
    step's own computed on the device (transformers' eager ones cannot be captured); either
    way teacher-forced logits equal transformers' forward (Gemma 2, eager attention, a
    window on every other layer; Phi-3, a window on every layer and no layer_types; windows
    past and within the 40 positions decoded)."""
    from tilegraph.model_demo import HFDecoder
    from tilegraph.testing import rel_error

    hf = random_hf_model(name, scale=3.0, sliding_window=window)
    if name == "tiny-gemma2":   # softcapped: transformers' eager attention, eager masks
        assert hf.config._attn_implementation == "eager"
    layer_types = getattr(hf.config, "layer_types", None)
    decoder = HFDecoder(hf, 2, 48)
    decoder.masks_on_device = masks_on_device
    assert {type(layer).__name__ for layer in decoder.cache.layers} == {"StaticLayer"}
    assert getattr(hf.config, "layer_types", None) == layer_types   # untouched
    prompts, continuation = torch.randint(3, 67, (2, 10)), torch.randint(3, 67, (2, 30))
    logits = decoder.score(prompts, continuation, decoder.step)
    with torch.no_grad():
        ref = hf(torch.cat([prompts, continuation], dim=1)).logits[:, 9:39]
    assert max(rel_error(logits[:, t], ref[:, t]) for t in range(30)) < 1e-5


def test_a_peer_that_raises_while_building_is_listed_with_why(monkeypatch):
    """transformers 5.17's Falcon copies a host list to the GPU in its step, which graph
    capture refuses: the demo lists hf-graph as unavailable, first line of the error, and
    goes on to the other variants."""
    from tilegraph import model_demo
    from tilegraph.bench import Unavailable

    def refuses(*args):
        raise RuntimeError("Cannot copy between CPU and CUDA tensors during CUDA graph "
                           "capture\nunless pinned")
    monkeypatch.setattr(model_demo, "_peer_step", refuses)
    peer = model_demo._build_peer("hf-eager", random_hf_model("tiny-llama3"), None,
                                  torch.zeros(1, 3, dtype=torch.long), 4, 16)
    assert peer == Unavailable("hf-eager raised while building: Cannot copy between CPU and "
                               "CUDA tensors during CUDA graph capture")


def test_an_eager_peer_that_cannot_decode_is_listed_while_building(monkeypatch):
    """transformers' ALiBi Falcon sizes its bias for the prompt, not a static cache, and
    raises at the first step: hf-eager runs a step while it builds, so the demo lists it
    as unavailable instead of ending there."""
    from tilegraph import model_demo
    from tilegraph.bench import Unavailable

    def fails(self):
        raise RuntimeError("The size of tensor a (16) must match the size of tensor b (5)")
    monkeypatch.setattr(model_demo.HFDecoder, "step", fails)
    peer = model_demo._build_peer("hf-eager", random_hf_model("tiny-llama3"), None,
                                  torch.zeros(1, 3, dtype=torch.long), 4, 16)
    assert peer == Unavailable("hf-eager raised while building: The size of tensor a (16) "
                               "must match the size of tensor b (5)")


def test_a_model_without_a_cache_has_no_hf_peer():
    """The first GPT's transformers model takes no cache (a step's one token would be read as
    the whole sequence): no HF variant, said why."""
    from tilegraph import model_demo
    from tilegraph.bench import Unavailable

    cuda = torch.cuda.is_available()   # (elsewhere the others need CUDA first)
    prompts = torch.zeros(1, 3, dtype=torch.long, device="cuda" if cuda else "cpu")
    for name in ("hf-eager", "hf-graph", "hf-compile") if cuda else ("hf-eager",):
        peer = model_demo._build_peer(name, random_hf_model("tiny-openai-gpt"), None,
                                      prompts, 4, 16)
        assert peer == Unavailable("transformers' OpenAIGPTLMHeadModel keeps no KV cache: it "
                                   "has no decode step"), name


class HostSyncingDecoder(StaticOutputDecoder):
    """A step that reads a device value on the host, as transformers 5.17's OPT sizes its
    mask by the cache's length: capture would fail, and leave the CUDA RNG in capture state."""

    def __init__(self):
        super().__init__(2, 7, torch.float32, "cuda")
        self.hf = SimpleNamespace(config=SimpleNamespace(_attn_implementation="sdpa"))

    def step(self) -> torch.Tensor:
        torch.zeros(int(self.position.item()) + 1, device="cuda")
        return super().step()


@pytest.mark.gpu
def test_a_hand_graph_of_a_host_syncing_step_fails_before_capture_and_leaves_cuda_whole():
    from tilegraph import model_demo
    from tilegraph.errors import CaptureError

    decoder = HostSyncingDecoder()
    with pytest.raises(CaptureError):
        model_demo._hand_graph(decoder, torch.randint(0, 7, (2, 3), device="cuda"))
    # what a capture after a failed one would trip on: the RNG's offset outside capture
    torch.randn(4, device="cuda")
    graph, out = torch.cuda.CUDAGraph(), torch.empty(5, device="cuda")
    with torch.cuda.graph(graph):
        torch.randn(5, device="cuda", out=out)
    graph.replay()
    assert torch.isfinite(out).all()
