"""torch integration: custom ops, fake implementations, torch.compile and autograd on the reference.
Skipped (with the reason) where torch is not installed."""
import numpy as np
import pytest

import attnjit
from conftest import attention, torch_or_skip


def test_custom_ops_registered_and_opcheck():
    torch = torch_or_skip()
    assert hasattr(torch.ops.attnjit, "gqa_fwd") and hasattr(torch.ops.attnjit, "bsa_fwd_autograd")
    q = torch.randn(1, 3, 2, 64, dtype=torch.float16)
    k = v = torch.randn(1, 4, 2, 64, dtype=torch.float16)
    o = torch.empty_like(q)
    lse = torch.empty(1, 2, 3, dtype=torch.float32)
    cfg = '{"impl": "reference", "is_causal": false}'
    torch.library.opcheck(torch.ops.attnjit.gqa_fwd.default, (q, k, v, None, None, None, None, None, o, lse, cfg),
                          test_utils=("test_schema", "test_faketensor"))


def test_torch_cpu_tensors_and_compile_fullgraph():
    torch = torch_or_skip()
    q = torch.randn(1, 3, 2, 64, dtype=torch.float16)
    k = torch.randn(1, 4, 2, 64, dtype=torch.float16)
    v = torch.randn(1, 4, 2, 64, dtype=torch.float16)
    eager = attnjit.gqa_fwd(q, k, v, is_causal=False)
    ref, _ = attention(q[0, :, 0].numpy(), k[0, :, 0].numpy(), v[0, :, 0].numpy())
    assert np.allclose(eager[0, :, 0].float().numpy(), ref, atol=3e-3)
    compiled = torch.compile(lambda a, b, c: attnjit.gqa_fwd(a, b, c, is_causal=False), fullgraph=True)
    assert torch.equal(compiled(q, k, v), eager)


def test_bsa_fwd_autograd_matches_reference_gradients():
    torch = torch_or_skip()
    torch.manual_seed(0)
    q = torch.randn(1, 1, 64, 64, dtype=torch.float16, requires_grad=True)
    k = torch.randn(1, 1, 64, 64, dtype=torch.float16, requires_grad=True)
    v = torch.randn(1, 1, 64, 64, dtype=torch.float16, requires_grad=True)
    index = torch.zeros(1, 1, 1, 1, dtype=torch.int32)
    o = attnjit.bsa_fwd(q, k, v, index)
    do = torch.randn_like(o)
    o.backward(do)
    qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref = torch.softmax(qd @ kd.transpose(-1, -2) / 8.0, -1) @ vd
    ref.backward(do.double())
    for got, want in ((q.grad, qd.grad), (k.grad, kd.grad), (v.grad, vd.grad)):
        assert torch.linalg.norm(got.double() - want) <= 2e-2 * torch.linalg.norm(want)
