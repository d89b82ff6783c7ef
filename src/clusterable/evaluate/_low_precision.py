"""A low-precision candidate pass for the torch search, with a proven error bound, whose
candidates are re-scored in float32: the same neighbours as the float32 pass, fewer float32 flops.

The float32 pass (`_torch_search.TorchSearch.candidates`) ranks every reference of a query by
``L = |r|^2 - 2 q.r`` (``|q|^2``, the same along a row, is added to the selected only) computed
with IEEE float32 products. This pass computes ``L`` with products of rounded inputs, bfloat16
(``"bf16"``: 8 significant bits, unit roundoff ``v = 2**-8``, rounded here to nearest) or TF32
(``"tf32"``, CUDA only: 11 significant bits, truncated by the tensor cores, ``v = 2**-10``),
accumulated in float32; bounds its error per pair; keeps every reference that the bound cannot
rule out of the float32 pass's ``kk`` nearest; and re-scores those in float32.

The bound. Let ``E = |r|^2 - 2 q.r`` in exact arithmetic on the float32 points, ``d`` the
dimension, ``u = 2**-23`` the accumulation's unit (twice float32's ``2**-24``: it covers tensor
cores that align and truncate rather than round, Fasi, Higham, Mikaitis & Pranesh, "Numerical
behavior of NVIDIA tensor cores", PeerJ CS 2021) and ``g = d u / (1 - d u)`` (Higham, "Accuracy
and Stability of Numerical Algorithms", 2002, Lemma 3.1: ``gamma_d``). With ``q~_i = q_i (1 +
a_i)``, ``r~_i = r_i (1 + b_i)``, ``|a_i|, |b_i| <= v``:

1. input rounding: ``|q~.r~ - q.r| = |sum q_i r_i (a_i + b_i + a_i b_i)| <= (2v + v^2) sum
   |q_i r_i| <= (2v + v^2) |q| |r|`` (Cauchy-Schwarz);
2. accumulation: the products of two 8- or 11-bit significands are exact in float32, and a sum
   of ``d`` terms in any order errs by at most ``g sum |q~_i r~_i| <= g (1 + v)^2 |q| |r|``
   (Higham, eq. 3.5); so ``|P - q.r| <= b |q| |r|`` with ``b = 2v + v^2 + g (1 + v)^2``;
3. the norm ``|r|^2``, a float32 sum of ``d`` squares: ``|s - |r|^2| <= g |r|^2``;
4. the last step ``fl(s - 2 P)`` (the product by 2 exact): at most ``u (s + 2 |P|) <= u ((1 + g)
   |r|^2 + 2 (1 + b) |q| |r|)``.

So ``|L~ - E| <= A |q| |r| + C |r|^2`` with ``A = 2 b + 2 u (1 + b)`` and ``C = g + u (1 + g)``
(`error_coefficients`), each multiplied by `SAFETY` for the rounding of the bound's own terms
(the norms are float32 square roots). The float32 pass obeys the same bound with ``v = 0``:
``A32, C32``. Values are scaled near 1 (`neighbors.power_of_two_scale`), so subnormal inputs
that a tensor core flushes to zero move a product by less than ``2**-126``: far below the bound.

The candidates. Per query, let ``B(r) = A |q| |r| + C |r|^2`` and ``B32(r)`` likewise, and
``Bmax``, ``B32max`` their values at the largest reference norm ``R``. Let ``S`` be the ``kk``
smallest by ``L~`` and ``L~_kk`` the largest of them. Any reference ``r`` among the float32
pass's ``kk`` nearest has ``F(r) <= max_S F <= max_S (L~ + B + B32) <= L~_kk + Bmax + B32max``,
and ``L~(r) <= F(r) + B32(r) + B(r)``; so

    ``L~(r) <= L~_kk + 2 (Bmax + B32max)``,

the window. The pass keeps each row's ``cap`` (`CAP_FACTOR`) smallest ``L~``; a row whose
``cap``-th is beyond the window holds every reference the float32 pass can select, ties
included: those within its window (the widest window of the chunk, to keep the shapes even) are
re-scored in float32 (``fl(|r|^2 - 2 q.r)``, the float32 pass's formula,
though not its kernel: the last bits may differ, well within the near-tie bound of
`neighbors.NEAR_TIE_RTOL` that sends near-ties to the exact float64 re-scoring), and the ``kk``
smallest of those are the candidates. A row whose window holds more than ``cap`` references
(more than ``cap`` points bunched within the bound) is searched again by the float32 pass: the
answer does not depend on the data being kind.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

import torch

Precision = Literal["bf16", "tf32"]

#: Unit roundoff of each input's rounding: bfloat16 rounded to nearest here; TF32 truncated by the
#: tensor cores (a relative error below ``2**-10``).
INPUT_UNIT: dict[str, float] = {"bf16": 2.0**-8, "tf32": 2.0**-10}

#: The accumulation's unit: twice float32's, for tensor cores that truncate (module docstring).
ACCUMULATION_UNIT = 2.0**-23

#: Factor on the bound for the rounding of its own terms (float32 norms and square roots).
SAFETY = 1.0 + 2.0**-10

#: References kept per row by the low-precision selection, ``ceil(CAP_FACTOR[precision] * kk)``:
#: enough for the window of the million-item benchmark's data (1,000 classes of ~1,000 points,
#: their distances bunched near sqrt(2)), about 1.3 kk for TF32 and 2.5 kk for bfloat16 as
#: measured on 200,000 of its points, scaled; a row whose window holds more is searched in
#: float32. The GPU run's share of such rows (``bench_gpu_evaluate.py``) is what to tune it by.
CAP_FACTOR: dict[str, float] = {"bf16": 2.0, "tf32": 1.5}

#: Elements of the ``(rows, cap, d)`` float32 block gathered for the re-scoring (64 MB).
GATHER_BLOCK = 1 << 24

Candidates = tuple[torch.Tensor, torch.Tensor]


def error_coefficients(input_unit: float, d: int) -> tuple[float, float]:
    """``(A, C)`` such that ``|L~ - E| <= A |q| |r| + C |r|^2`` (module docstring).

    Parameters
    ----------
    input_unit : float
        Unit roundoff of the inputs' rounding (`INPUT_UNIT`; 0 for IEEE float32 products).
    d : int
        The dimension: terms of each dot product.

    Returns
    -------
    tuple of float
        ``A``, the coefficient of ``|q| |r|``, and ``C``, that of ``|r|^2``, `SAFETY` included.
    """
    u, v = ACCUMULATION_UNIT, input_unit
    gamma = d * u / (1.0 - d * u)  # gamma_d (Higham, Lemma 3.1)
    b = 2.0 * v + v * v + gamma * (1.0 + v) ** 2  # |P - q.r| <= b |q| |r|
    return SAFETY * (2.0 * b + 2.0 * u * (1.0 + b)), SAFETY * (gamma + u * (1.0 + gamma))


@contextmanager
def matmul_precision(precision: Precision | None, device: torch.device) -> Iterator[None]:
    """float32 products within the block: IEEE (None, and ``"bf16"`` on the CPU, whose inputs
    are already bfloat16 values) or TF32 (``"tf32"``, and ``"bf16"`` on CUDA: a bfloat16 value is
    a TF32 value, so the tensor cores' products of it are exact)."""
    tf32 = precision == "tf32" or (precision == "bf16" and device.type == "cuda")
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def rounded(x: torch.Tensor, precision: Precision) -> torch.Tensor:
    """``x`` as the pass's products see it: rounded to bfloat16 (to nearest) and held in float32
    for ``"bf16"``; ``x`` itself for ``"tf32"``, which the tensor cores round."""
    return x.to(torch.bfloat16).float() if precision == "bf16" else x


class CandidatePass:
    """The low-precision candidate pass over ``(n', d)`` float32 ``padded`` references (the first
    ``n`` real, the rest padding whose ``ref_sq`` is +inf), as the module docstring proves it.

    ``fallback_rows`` counts the queries searched again by the float32 pass (their window held
    more than ``cap`` references).
    """

    def __init__(
        self, padded: torch.Tensor, ref_sq: torch.Tensor, n: int, precision: Precision
    ) -> None:
        if precision not in INPUT_UNIT:
            raise ValueError(f"precision must be 'bf16' or 'tf32', got {precision!r}.")
        if precision == "tf32" and padded.device.type != "cuda":
            raise ValueError("precision 'tf32' needs a CUDA device; on the CPU use 'bf16'.")
        self.precision = precision
        self.padded, self.ref_sq = padded, ref_sq  # (n', d), (n',)
        self.low_ref = rounded(padded, precision)  # (n', d)
        d = padded.shape[1]
        self.coefficients = error_coefficients(INPUT_UNIT[precision], d)
        self.float32_coefficients = error_coefficients(0.0, d)
        self.max_norm = ref_sq[:n].max().sqrt().item() if n else 0.0
        self.fallback_rows = 0

    def partials(self, queries: torch.Tensor) -> torch.Tensor:
        """``(c, n')`` low-precision ``L~ = |r|^2 - 2 q~.r~`` of ``(c, d)`` float32 ``queries``."""
        low_q = rounded(queries, self.precision)  # (c, d)
        with matmul_precision(self.precision, queries.device):
            return torch.addmm(self.ref_sq, low_q, self.low_ref.T, alpha=-2.0)  # (c, n')

    def window(self, queries: torch.Tensor) -> torch.Tensor:
        """``(c,)`` ``2 (Bmax + B32max)``: how far beyond ``L~_kk`` a candidate can lie."""
        q_norm = (queries * queries).sum(1).sqrt()  # (c,)
        r = self.max_norm
        (a, c), (a32, c32) = self.coefficients, self.float32_coefficients
        return 2.0 * ((a + a32) * q_norm * r + (c + c32) * r * r)

    def candidates(
        self,
        queries: torch.Tensor,
        kk: int,
        float32_pass: Callable[[torch.Tensor, int], Candidates],
    ) -> Candidates:
        """The float32 pass's ``kk`` candidates of ``(c, d)`` float32 ``queries``: ``(c, kk)``
        float32 distances (non-negative) and int64 ids, in no set order; ``float32_pass`` (that
        pass) searches the rows whose window overflows the cap."""
        if self.cap(kk) >= self.padded.shape[0]:  # no reference to leave out
            return float32_pass(queries, kk)
        ids, overflow = self.select(queries, self.partials(queries), kk)
        values, picked = self.rescored(queries, ids, kk)
        rows = overflow.nonzero()[:, 0]
        if rows.numel():
            self.fallback_rows += rows.numel()
            values[rows], picked[rows] = float32_pass(queries[rows], kk)
        return values, picked

    def cap(self, kk: int) -> int:
        """References kept per row for ``kk`` candidates (`CAP_FACTOR`)."""
        return math.ceil(CAP_FACTOR[self.precision] * kk)

    def select(
        self, queries: torch.Tensor, partial: torch.Tensor, kk: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The references of ``(c, n')`` ``partial`` (`partials` of ``queries``) that each row's
        window holds, among its ``cap`` smallest: ``(c, w)`` ids, ``w`` the widest window of the
        chunk, each row's window a prefix (its ``L~`` ascending); and the ``(c,)`` rows whose
        window holds more than ``cap``."""
        low, ids = partial.topk(self.cap(kk), dim=1, largest=False, sorted=True)  # (c, cap)
        bound = low[:, kk - 1] + self.window(queries)  # (c,) L~_kk + 2 (Bmax + B32max)
        inside = (low <= bound[:, None]).sum(1)  # (c,) within the window: a prefix of the row
        overflow = inside == low.shape[1]
        width = max(kk, int(inside.masked_fill(overflow, 0).max()))  # one sync a chunk
        return ids[:, :width], overflow

    def rescored(self, queries: torch.Tensor, ids: torch.Tensor, kk: int) -> Candidates:
        """The ``kk`` smallest of ``(c, w)`` ``ids`` by float32 ``|q|^2 + |r|^2 - 2 q.r``:
        ``(c, kk)`` distances (non-negative) and ids."""
        c, cap = ids.shape
        partial = torch.empty(c, cap, device=queries.device)  # (c, cap)
        step = max(1, GATHER_BLOCK // (cap * self.padded.shape[1]))
        with matmul_precision(None, queries.device):
            for s in range(0, c, step):
                block = ids[s : s + step]  # (b, cap)
                dots = torch.bmm(self.padded[block], queries[s : s + step, :, None])  # (b, cap, 1)
                partial[s : s + step] = self.ref_sq[block] - 2.0 * dots[:, :, 0]
        values, pick = partial.topk(kk, dim=1, largest=False, sorted=False)  # (c, kk)
        values += (queries * queries).sum(1, keepdim=True)
        return values.clamp_min_(0.0), ids.gather(1, pick)
