"""Choosing the next token on the device, with no host sync and fixed shapes (graph-safe).

    greedy(logits)                                            # argmax
    sample(logits, temperature, top_k, top_p, seed, position) # per row

Sampling draws its randomness from a hash of (seed, position, token id) instead of a random
number generator: a captured graph needs no generator state, a run is reproducible from its
seed on any device, and the same call twice (a runner's warm-up, a retry) gives the same
token.
"""

from __future__ import annotations

import torch

_MASK32 = 0xFFFFFFFF


def _mix32(h: torch.Tensor) -> torch.Tensor:
    """MurmurHash3's 32-bit finaliser on int64 tensors holding values below 2**32 (products
    wrap in int64, and the mask keeps their exact low 32 bits)."""
    h = h ^ (h >> 16)
    h = (h * 0x85EBCA6B) & _MASK32
    h = h ^ (h >> 13)
    h = (h * 0xC2B2AE35) & _MASK32
    return h ^ (h >> 16)


def uniform_noise(seed: torch.Tensor, position: torch.Tensor, token: torch.Tensor
                  ) -> torch.Tensor:
    """Uniform floats in (0, 1), one per element of the broadcast of the int64 inputs."""
    h = _mix32((seed & _MASK32) ^ _mix32(position & _MASK32))
    h = _mix32(h ^ (token & _MASK32))
    return ((h >> 8).to(torch.float32) + 0.5) * (1.0 / (1 << 24))


def row_seeds(seed: int, rows: int, device=None) -> torch.Tensor:
    """One seed per row of a batch, so rows with the same prompt draw differently."""
    row = torch.arange(rows, dtype=torch.int64, device=device)
    return _mix32(_mix32(torch.full_like(row, seed & _MASK32)) ^ row)


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """(rows, vocab) -> (rows,) int64: the most likely token."""
    return logits.argmax(dim=-1)


def sample(logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor,
           top_p: torch.Tensor, seed: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
    """(rows, vocab) -> (rows,) int64 drawn from softmax(logits / temperature), restricted
    to the top_k most likely tokens (0: all) and to the smallest set whose probability
    reaches top_p (1: all). Every argument but logits is (rows,); position is the position
    the new token will take, and with seed it fixes the draw."""
    vocab = logits.shape[-1]
    scaled = logits.float() / temperature[:, None].float()
    ranked, order = scaled.sort(dim=-1, descending=True)       # (rows, vocab)
    probs = torch.softmax(ranked, dim=-1)
    rank = torch.arange(vocab, device=logits.device)
    k = torch.where(top_k > 0, top_k, vocab)[:, None]
    # Keep a token while the probability before it is below top_p: the first always stays.
    keep = (rank < k) & ((probs.cumsum(dim=-1) - probs) < top_p[:, None].float())
    # Exponential race (equivalent to drawing from the renormalised kept probabilities):
    # the token with the largest p / E, E ~ Exp(1), wins.
    race = -torch.log(uniform_noise(seed[:, None], position[:, None], order))
    choice = torch.where(keep, probs / race, -1.0).argmax(dim=-1, keepdim=True)
    return order.gather(-1, choice).squeeze(-1)
