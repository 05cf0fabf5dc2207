"""Adam and AdamW's update over every parameter of a group in one launch: the optimizer step
tg.TrainStep records in place of torch's own.

For each parameter p with gradient g, moments m and v and step count t (t already advanced):
    p -= lr * weight_decay * p                    (AdamW; Adam adds weight_decay * p to g)
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g^2
    p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
in fp32, stored in the parameter's dtype: torch.optim's formula, on the same state tensors
(optimizer.state stays what torch would have made, so either can take the next step).
torch.optim's own step is the reference the tests compare with.

Why: torch's fused AdamW moved 940 MB of bf16 state in 434 us on the MLP training benchmark
(67 M parameters, H100), 72% of a copy of the same bytes, the largest single item of that
step. All tensors of a group are one launch here: a table gives each program its tensor's
offsets from one base pointer (offsets, not raw addresses, so the compiler keeps the 16-byte
alignment it knows of the base and loads 16 bytes at a time) and the block of it to update.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .._runtime import INTERPRET, is_capturing

NUM_WARPS = 4


def block_size(dtype: torch.dtype) -> int:
    """Elements a program. On the benchmark's 67 M parameters (research/probe_adamw.py, H100)
    bf16 ran best with 4 elements a thread (329 us, 95% of a copy; 8 a thread: 497-611 us)
    and fp32 with 8 (634 us, 98%; 4 a thread: 666 us)."""
    return NUM_WARPS * 32 * (8 if dtype == torch.float32 else 4)


_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# The optimizers stepped here (exactly these: a subclass may change step()).
ADAM_TYPES = (torch.optim.Adam, torch.optim.AdamW)


@triton.jit
def _one_minus_power(log_beta, t):
    """1 - beta^t from ln(beta), as -expm1(t ln beta) to a few fp32 units in the last place.
    1 - exp2(t log2 beta) in fp32 keeps only the digits of beta^t below 1, and the GPU's exp2
    is approximate: at t = 1 (a TrainStep's first replay) the update was 2.3e-5 lr off per
    element (median; torch's 6.8e-7), and a training run that amplifies such a start ended 4%
    from torch's (research/probe_adam_first_steps.py, notes/training.md, session 29)."""
    x = t * log_beta  # <= 0
    # expm1's series where |x| <= 0.5 (Horner; the first term left out is under 1e-10 of it)
    series = 1.0 + x / 10.0
    for k in tl.static_range(9, 1, -1):
        series = 1.0 + x / k * series
    return tl.where(x > -0.5, -x * series, 1.0 - tl.exp(x))


@triton.jit
def _adam_kernel(base_ptr, step_base_ptr, table_ptr, block_tensor_ptr, lr_ptr, beta1, beta2,
                 one_minus_beta1, one_minus_beta2, log_beta1, log_beta2, eps, weight_decay,
                 DECOUPLED: tl.constexpr, VECTOR: tl.constexpr, BLOCK: tl.constexpr):
    """One block of one tensor a program: block_tensor[pid] = (tensor index, first element);
    table[tensor] = offsets of p, g, m, v from base (elements), numel, offset of t from
    step_base. VECTOR: elements every offset is a multiple of (16 bytes' worth, or 1).
    1 - beta and ln(beta) come from the host in double precision: 1 - 0.999 formed in fp32
    is 1.3e-5 off, and v would be as far from torch's."""
    pid = tl.program_id(0)
    tensor = tl.load(block_tensor_ptr + 2 * pid)
    start = tl.load(block_tensor_ptr + 2 * pid + 1)
    row = table_ptr + tensor * 6
    p_off = tl.load(row)
    g_off = tl.load(row + 1)
    m_off = tl.load(row + 2)
    v_off = tl.load(row + 3)
    if VECTOR > 1:  # every tensor starts on 16 bytes, as the base does: vector accesses
        p_off = tl.multiple_of(p_off, VECTOR)
        g_off = tl.multiple_of(g_off, VECTOR)
        m_off = tl.multiple_of(m_off, VECTOR)
        v_off = tl.multiple_of(v_off, VECTOR)
    n = tl.load(row + 4)
    t = tl.load(step_base_ptr + tl.load(row + 5))
    lr = tl.load(lr_ptr).to(tl.float32)
    offsets = tl.multiple_of(start, BLOCK) + tl.arange(0, BLOCK)
    mask = offsets < n
    p = tl.load(base_ptr + p_off + offsets, mask=mask).to(tl.float32)
    g = tl.load(base_ptr + g_off + offsets, mask=mask).to(tl.float32)
    m = tl.load(base_ptr + m_off + offsets, mask=mask).to(tl.float32)
    v = tl.load(base_ptr + v_off + offsets, mask=mask).to(tl.float32)
    if DECOUPLED:
        p = p - lr * weight_decay * p
    else:
        g = g + weight_decay * p
    m = beta1 * m + one_minus_beta1 * g
    v = beta2 * v + one_minus_beta2 * g * g
    bias_correction1 = _one_minus_power(log_beta1, t)
    bias_correction2 = _one_minus_power(log_beta2, t)
    denom = tl.sqrt(v) / tl.sqrt_rn(bias_correction2) + eps
    p = p - (lr / bias_correction1) * m / denom
    dtype = base_ptr.dtype.element_ty
    tl.store(base_ptr + p_off + offsets, p.to(dtype), mask=mask)
    tl.store(base_ptr + m_off + offsets, m.to(dtype), mask=mask)
    tl.store(base_ptr + v_off + offsets, v.to(dtype), mask=mask)


def _log(beta: float) -> float:
    """ln(beta); beta = 0 (no momentum) makes every bias correction 1."""
    return math.log(beta) if beta > 0 else -math.inf


def _fusable_group(group: dict) -> bool:
    """Options the kernel implements: plain Adam/AdamW with a device tensor learning rate."""
    lr = group["lr"]
    return (not group.get("amsgrad") and not group.get("maximize")
            and not group.get("differentiable")
            and bool(group.get("capturable") or group.get("fused"))
            and isinstance(lr, torch.Tensor) and lr.numel() == 1
            and not any(isinstance(group[k], torch.Tensor) for k in ("eps", "weight_decay"))
            and not any(isinstance(b, torch.Tensor) for b in group["betas"]))


def _fusable_param(p: torch.Tensor, state: dict) -> bool:
    g, step = p.grad, state.get("step")
    moments = state.get("exp_avg"), state.get("exp_avg_sq")
    return (p.dtype in _DTYPES and (p.is_cuda or INTERPRET)
            and isinstance(step, torch.Tensor) and step.dtype == torch.float32
            and step.numel() == 1 and step.device == p.device
            and not g.is_sparse and g.dtype == p.dtype and g.shape == p.shape
            and all(isinstance(t, torch.Tensor) and t.dtype == p.dtype and t.shape == p.shape
                    and t.device == p.device and t.is_contiguous() for t in moments)
            and p.is_contiguous() and g.is_contiguous())


def _to_device(values: list, device: torch.device) -> torch.Tensor:
    """An int64 tensor of `values` on `device`, copied without the host waiting for the GPU
    (tg.capture's warm-up refuses host syncs)."""
    host = torch.tensor(values, dtype=torch.int64)
    if device.type != "cuda":
        return host.to(device)
    return host.pin_memory().to(device, non_blocking=True)


class MultiTensorAdam:
    """Steps a torch.optim.Adam or AdamW with one _adam_kernel launch per parameter group and
    dtype (after one launch advancing the step counts), where every option and tensor suits
    the kernel; otherwise, and for the first step (which makes the state), optimizer.step().
    The optimizer's step hooks run either way, as optimizer.step() runs them.

    Graph-safe: the offset tables are device tensors kept for as long as this object lives.
    Under capture a new table is copied from pinned host memory set aside by an earlier call
    (the graph replays that copy, so the host buffer is never written again).
    """

    def __init__(self, optimizer: torch.optim.Optimizer):
        if type(optimizer) not in ADAM_TYPES:
            raise TypeError(f"MultiTensorAdam steps torch.optim.Adam or AdamW, not "
                            f"{type(optimizer).__name__}")
        self.optimizer = optimizer
        self._eager: tuple[tuple, torch.Tensor] | None = None  # the last table made outside
        self._captured: dict[tuple, torch.Tensor] = {}  # graphs read these: never dropped
        self._blocks: dict[tuple, torch.Tensor] = {}    # numels -> (tensor, start) per block
        self._spare: torch.Tensor | None = None         # pinned, for the next capture
        self._kept_host: list[torch.Tensor] = []        # pinned sources of captured copies
        self.fused_steps = 0                            # steps taken through the kernel
        self._hooked = torch.optim.Optimizer.profile_hook_step(MultiTensorAdam._launch)

    def step(self) -> None:
        launches = self._plan()
        if launches is None:
            self.optimizer.step()
        else:
            self._hooked(self.optimizer, launches)
            self.fused_steps += 1

    @staticmethod
    def _launch(optimizer, launches) -> None:
        steps = [t for launch in launches for t in launch["steps"]]
        torch._foreach_add_(steps, 1)
        for launch in launches:
            group = launch["group"]
            beta1, beta2 = (float(b) for b in group["betas"])
            _adam_kernel[(launch["n_blocks"],)](
                launch["base"], launch["step_base"], launch["table"], launch["blocks"],
                group["lr"], beta1, beta2, 1 - beta1, 1 - beta2, _log(beta1),
                _log(beta2), group["eps"], group["weight_decay"],
                DECOUPLED=launch["decoupled"], VECTOR=launch["vector"],
                BLOCK=launch["block"], num_warps=NUM_WARPS)

    def _plan(self) -> list[dict] | None:
        """One launch's arguments per group and dtype, or None where torch must step."""
        optimizer = self.optimizer
        launches = []
        for group in optimizer.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            if not _fusable_group(group) or group["lr"].device != params[0].device:
                return None
            states = [optimizer.state.get(p, {}) for p in params]
            if not all(_fusable_param(p, s) for p, s in zip(params, states, strict=True)):
                return None  # e.g. the first step, before torch has made the state
            decoupled = group.get("decoupled_weight_decay",
                                  isinstance(optimizer, torch.optim.AdamW))
            for dtype in _DTYPES:
                chosen = [(p, s) for p, s in zip(params, states, strict=True)
                          if p.dtype == dtype]
                if chosen:
                    launch = self._tables_for(chosen)
                    if launch is None:
                        return None
                    launches.append({**launch, "group": group, "decoupled": decoupled})
        return launches or None

    def _tables_for(self, chosen: list[tuple[torch.Tensor, dict]]) -> dict | None:
        base, step_base = chosen[0][0], chosen[0][1]["step"]
        size = base.element_size()
        rows, aligned = [], True
        for p, s in chosen:
            for t in (p, p.grad, s["exp_avg"], s["exp_avg_sq"]):
                rows.append((t.data_ptr() - base.data_ptr()) // size)
                aligned &= t.data_ptr() % 16 == 0
            rows += [p.numel(), (s["step"].data_ptr() - step_base.data_ptr()) // 4]
        vector = 16 // size if aligned else 1
        block = block_size(base.dtype)
        numels = (block, *(p.numel() for p, _ in chosen))
        blocks = self._blocks.get(numels)
        if blocks is None:
            if is_capturing():
                return None  # made by a warm-up call outside the graph; none happened
            pairs = [(i, start) for i, n in enumerate(numels[1:]) for start in range(0, n, block)]
            blocks = _to_device(pairs, base.device)
            self._blocks[numels] = blocks
        key = (base.device, *rows)
        table = self._captured.get(key)
        if table is None and self._eager is not None and self._eager[0] == key:
            table = self._eager[1]
            if is_capturing():  # the graph reads it from now on
                self._captured[key] = table
        if table is None:
            table = self._make_table(rows, base.device)
            if table is None:
                return None
            if is_capturing():
                self._captured[key] = table
            else:
                self._eager = (key, table)
        return {"base": base, "step_base": step_base, "table": table, "blocks": blocks,
                "n_blocks": blocks.shape[0], "block": block, "vector": vector,
                "steps": [s["step"] for _, s in chosen]}

    def _make_table(self, rows: list[int], device: torch.device) -> torch.Tensor | None:
        if not is_capturing():
            if device.type == "cuda" and (self._spare is None or
                                          self._spare.numel() < len(rows)):
                self._spare = torch.empty(len(rows), dtype=torch.int64, pin_memory=True)
            return _to_device(rows, device)
        host = self._spare
        if host is None or host.numel() < len(rows):
            return None
        self._spare = None
        self._kept_host.append(host)  # the graph's copy reads it on every replay
        host[:len(rows)] = torch.tensor(rows, dtype=torch.int64)
        table = torch.empty(len(rows), dtype=torch.int64, device=device)
        table.copy_(host[:len(rows)], non_blocking=True)
        return table
