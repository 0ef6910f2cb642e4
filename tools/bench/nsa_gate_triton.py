"""The NSA gated sum as one fused triton kernel, for the benchmark's whole-forward chain (bench_nsa.py):
out = g_cmp * o_cmp + g_sel * o_sel + g_win * o_win, [T, H, D] branch outputs in bf16/fp16, [T, H] fp32
gates, fp32 arithmetic and one rounding to the output dtype. It reads the three branches and the gates
once and writes the output once (what a model's compiled graph does with this elementwise tail); attnjit
itself has no gate op. Contiguous [T, H, D] tensors, D a power of two.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _gate_kernel(o_cmp, o_sel, o_win, g_cmp, g_sel, g_win, out, n_rows, D: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    ok = rows < n_rows
    cols = tl.arange(0, D)
    offs = rows[:, None] * D + cols[None, :]
    m = ok[:, None]
    a = tl.load(g_cmp + rows, mask=ok, other=0.0)[:, None] * tl.load(o_cmp + offs, mask=m, other=0.0).to(tl.float32)
    a += tl.load(g_sel + rows, mask=ok, other=0.0)[:, None] * tl.load(o_sel + offs, mask=m, other=0.0).to(tl.float32)
    a += tl.load(g_win + rows, mask=ok, other=0.0)[:, None] * tl.load(o_win + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(out + offs, a.to(out.dtype.element_ty), mask=m)


def fused_gate(o_cmp, o_sel, o_win, g_cmp, g_sel, g_win, out):
    T, H, D = o_cmp.shape
    for x in (o_cmp, o_sel, o_win, out):
        assert x.is_contiguous() and tuple(x.shape) == (T, H, D), "fused_gate: contiguous [T, H, D] tensors"
    for g in (g_cmp, g_sel, g_win):
        assert g.is_contiguous() and tuple(g.shape) == (T, H), "fused_gate: contiguous [T, H] gates"
    assert D & (D - 1) == 0, "fused_gate: D a power of two"
    rows = 16
    _gate_kernel[(triton.cdiv(T * H, rows),)](o_cmp, o_sel, o_win, g_cmp, g_sel, g_win, out, T * H, D=D, ROWS=rows)
    return out
