"""The model demo's decode harness (model_demo.GreedyDecoder), off any model."""

import torch

from tilegraph.model_demo import GreedyDecoder


class StaticOutputDecoder(GreedyDecoder):
    """A step that writes its logits into one buffer and returns it, as a captured CUDA graph
    replays into its static output: logits[b, v] = 1 + ids[b] * v + position."""

    def __init__(self, batch: int, vocab: int, dtype: torch.dtype):
        super().__init__(batch, torch.device("cpu"))
        self.columns = torch.arange(vocab, dtype=dtype)
        self.logits = torch.empty(batch, vocab, dtype=dtype)

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
