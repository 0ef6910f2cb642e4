"""The kv_cache family's suite of tools/bench/bench_torch.py: paged_kv_write (vs index_copy_ / index_put_ and
a device-to-device copy of the same bytes).
"""
from __future__ import annotations

import time

import torch
from bench_rows import per_second, result_row
from bench_common import COPY_CEILING_GBS, add_row, bench, host_us_per_call


# ----------------------------------------------------------------------------------------------------
# paged_kv_write suite

def run_paged_kv_write(rt, cache_dtype, args):
    torch.manual_seed(99)
    dev = "cuda"
    H, D, PS = 8, 128, 16
    N = (1 << 30) // (2 * H * D * 2)  # k + v = 1 GiB of bf16
    NP = N // PS
    k = torch.randn(N, H, D, dtype=torch.bfloat16, device=dev)
    v = torch.randn(N, H, D, dtype=torch.bfloat16, device=dev)
    perm = torch.randperm(NP, device=dev)
    n = torch.arange(N, device=dev)
    slot = (perm[n // PS] * PS + n % PS).to(torch.int64)  # pages in shuffled order
    e4m3 = cache_dtype == "e4m3"
    tdt = torch.float8_e4m3fn if e4m3 else torch.bfloat16
    kp = torch.empty(NP, PS, H, D, dtype=tdt, device=dev)
    vp = torch.empty(NP, PS, H, D, dtype=tdt, device=dev)
    tensors = {"k": k, "v": v, "k_pages": kp, "v_pages": vp, "slot_mapping": slot}
    k_scale = v_scale = None
    if e4m3:
        k_scale = (k.float().abs().amax() / 448.0).reshape(1).contiguous()
        v_scale = (v.float().abs().amax() / 448.0).reshape(1).contiguous()
        tensors.update(k_scale=k_scale, v_scale=v_scale)
    esz = kp.element_size()
    bytes_moved = 2 * N * H * D * 2 + N * 8 + 2 * N * H * D * esz
    name = f"pkw bf16->{cache_dtype} N{N} H{H} D{D} PS{PS}"
    params = {"N": N, "H_kv": H, "D": D, "PS": PS, "NP": NP, "cache": cache_dtype, "bytes": bytes_moved}
    case_rows = []

    def rate(r, t):
        r["gbs"] = per_second(bytes_moved, t, 1e9)
        r["frac_of_copy_ceiling"] = r["gbs"] / COPY_CEILING_GBS

    def row(impl, t=None, note="", error=None, extra=None):
        case_rows.append(result_row("paged_kv_write", name, impl, params, "index_copy_", t, note, error, extra,
                                    rate=rate))

    def poison():
        kp.view(torch.uint8).fill_(0xFF)  # bf16 0xFFFF and e4m3 0xFF are NaN
        vp.view(torch.uint8).fill_(0xFF)

    # ---- attnjit
    snap = None
    if rt is None:
        row("attnjit plan_execute", error=args.rt_error)
    else:
        try:
            t0 = time.perf_counter()
            plan = rt.plan("paged_kv_write", {}, tensors)
            plan_s = time.perf_counter() - t0
            call = plan.bind(tensors)
            poison()
            call()
            torch.cuda.synchronize()
            snap = (kp.view(torch.uint8).clone(), vp.view(torch.uint8).clone())
            host = host_us_per_call(call, 20)
            t = bench(call, args.min_reps)
            row("attnjit plan_execute", t, f"plan_create {plan_s * 1e3:.0f} ms; host {host:.1f} us/call",
                extra={"plan_create_s": plan_s, "host_us_execute_bound": host})
            plan.close()
        except Exception as e:  # noqa: BLE001
            row("attnjit plan_execute", error=f"{type(e).__name__}: {e}")

    def compare(impl_note):
        """Bytes of the pools vs attnjit's (all rows are written: N == NP * PS)."""
        if snap is None:
            return {}, "no attnjit pool"
        dk = (kp.view(torch.uint8) != snap[0]).sum().item()
        dv = (vp.view(torch.uint8) != snap[1]).sum().item()
        if e4m3:
            a = kp.float()
            b = snap[0].view(torch.float8_e4m3fn).float()
        else:
            a = kp.float()
            b = snap[0].view(torch.bfloat16).float()
        mx = (a - b).abs().nan_to_num(float("inf")).max().item()
        nan_ours = int(torch.isnan(b).sum().item())
        check = "== attnjit" if dk + dv == 0 else f"{dk + dv} B differ"
        if nan_ours:
            check += f", attnjit NaN {nan_ours}"
        return {"bytes_differing": dk + dv, "maxabs_ref": mx, "nan_in_attnjit_pool": nan_ours}, check

    # ---- plain PyTorch peers (the same scatter, as torch writes it)
    kflat = kp.view(torch.uint8).view(NP * PS, H, D * esz) if e4m3 else kp.view(NP * PS, H, D)
    vflat = vp.view(torch.uint8).view(NP * PS, H, D * esz) if e4m3 else vp.view(NP * PS, H, D)

    def quant(x, s):
        # (x / scale) in fp32 (bf16 tensor / fp32 [1] tensor promotes to fp32), cast to e4m3, as bytes;
        # index_copy_ on uint8 views (float8 index ops are not implemented everywhere): same bytes.
        return (x / s).to(torch.float8_e4m3fn).view(torch.uint8)

    if e4m3:
        peers = [
            ("torch index_copy_", lambda: (kflat.index_copy_(0, slot, quant(k, k_scale)),
                                           vflat.index_copy_(0, slot, quant(v, v_scale))),
             "(k / k_scale).to(float8_e4m3fn) then index_copy_ on uint8 views"),
            ("torch index_put_", lambda: (kflat.index_put_((slot,), quant(k, k_scale)),
                                          vflat.index_put_((slot,), quant(v, v_scale))),
             "(k / k_scale).to(float8_e4m3fn) then pool[slot] = ... on uint8 views"),
        ]
    else:
        peers = [
            ("torch index_copy_", lambda: (kflat.index_copy_(0, slot, k), vflat.index_copy_(0, slot, v)),
             "k_pages.view(-1, H, D).index_copy_(0, slot_mapping, k)"),
            ("torch index_put_", lambda: (kflat.index_put_((slot,), k), vflat.index_put_((slot,), v)),
             "k_pages.view(-1, H, D)[slot_mapping] = k"),
        ]
    for impl, fn, note in peers:
        try:
            poison()
            fn()
            torch.cuda.synchronize()
            extra, check = compare(impl)
            t = bench(fn, args.min_reps)
            row(impl, t, note, extra=dict(extra, check=check))
        except Exception as e:  # noqa: BLE001
            row(impl, error=f"{type(e).__name__}: {e}")

    # ---- the ceiling: a device-to-device copy moving the same number of bytes (read + written)
    try:
        half = (bytes_moved // 2 + 15) // 16 * 16
        src = torch.randint(0, 256, (half,), dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        t = bench(lambda: dst.copy_(src), args.min_reps)
        row("torch d2d copy", t, f"dst.copy_(src) of {half / 2**20:.0f} MiB (same bytes read + written)")
    except Exception as e:  # noqa: BLE001
        row("torch d2d copy", error=f"{type(e).__name__}: {e}")

    peer_ms = next((r["ms"] for r in case_rows if r["impl"] == "torch index_copy_" and not r.get("error")), None)
    copy_ms = next((r["ms"] for r in case_rows if r["impl"] == "torch d2d copy" and not r.get("error")), None)
    for r in case_rows:
        if r.get("ms") and not r.get("error"):
            if peer_ms:
                r["ratio"] = peer_ms / r["ms"]
            if copy_ms:
                r["frac_of_measured_copy"] = copy_ms / r["ms"]
                r["note"] = f"{100 * copy_ms / r['ms']:.0f}% of copy; " + r["note"]
        add_row(r)
