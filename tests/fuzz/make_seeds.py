#!/usr/bin/env python3
"""Writes the committed seed corpora of tests/fuzz/corpus/<target>/ (run from anywhere; output is
committed). fuzz_c_api seeds follow the byte layout decoded by tests/fuzz/fuzz_c_api.cpp."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OPS = ["paged_kv_write", "gqa_fwd", "gqa_varlen_fwd", "gqa_paged_fwd", "mha_decode_paged",
       "gqa_prefill_paged_append", "fp8_lightning_indexer", "topk_select", "lightning_indexer", "bsa_bwd",
       "bsa_fwd", "bsa_fp8_fwd", "no_such_op"]
NAMES = ["block_sizes", "block_table", "cache_seqlens", "cu_seqlen_ke", "cu_seqlen_ks", "cu_seqlens",
         "cu_seqlens_k", "cu_seqlens_kv", "cu_seqlens_q", "dk", "do", "dq", "dv", "ends", "index_k",
         "index_k_scale", "index_q", "index_score", "indexes", "indices", "k", "k_new", "k_pages", "k_scale",
         "logits", "lse", "o", "q", "q2k_block_index", "q2k_block_nums", "q_scale", "rope_cos", "rope_sin",
         "sinks", "slot_mapping", "starts", "v", "v_new", "v_pages", "v_scale", "weights", "bogus"]
EXTENTS = [0, 1, 2, 3, 4, 7, 8, 16, 64, 128, 65, -1, 1 << 31, 1 << 40, 1 << 62, (1 << 63) - 1]
DTYPES = {"fp16": 0, "bf16": 1, "fp32": 2, "int32": 3, "int64": 4, "e4m3": 5, "fp64": 6, "fp16x4": 7}
DEVICES = {"cpu": 0, "cuda": 1, "foreign": 4}


PAGE = [0]


def extent(e):
    if 0 <= e <= 8:
        return e
    i = EXTENTS.index(e)
    return 200 + ((i - 200) % 16)


def tensor(name, shape, dtype, strides=None, device=None, byte_offset=None, null_data=False, null_shape=False,
           ndim=None):
    flags = 0
    out = [NAMES.index(name)]
    if null_shape:
        flags |= 1
    if strides is not None:
        flags |= 2
    if device is not None:
        flags |= 4
    if byte_offset is not None:
        flags |= 16 | (32 if byte_offset > 255 else 0)
    if null_data:
        flags |= 64
    if ndim is not None:
        flags |= 0x80
    b = bytes(out) + bytes([flags])
    b += struct.pack("b", ndim) if ndim is not None else bytes([len(shape)])
    b += bytes(extent(e) for e in shape)
    if strides is not None:
        b += bytes(s if 0 <= s < 130 else 200 + ((EXTENTS.index(s) - 200) % 16) for s in strides)
    b += bytes([DTYPES[dtype]])
    if device is not None:
        b += bytes([DEVICES[device]])
    if byte_offset is not None:
        b += struct.pack("<Q", byte_offset) if byte_offset > 255 else bytes([byte_offset])
    if device not in (None, "cpu") and not null_data:
        PAGE[0] += 1
        b += bytes([PAGE[0] % 256])  # the fake device address's page (distinct: outputs must not overlap)
    return b


def call(op, config, tensors, reference=True, splice=False, how=0):
    mode = (1 if reference else 0) | (2 if splice else 0)
    cfg = config.encode()
    b = bytes([mode, OPS.index(op)]) + struct.pack("<H", len(cfg)) + cfg + bytes([len(tensors)])
    for t in tensors:
        b += t
    return b + bytes([how])


def gqa(**over):
    t = {"q": ([1, 4, 2, 64], "fp16"), "k": ([1, 4, 1, 64], "fp16"), "v": ([1, 4, 1, 64], "fp16"),
         "o": ([1, 4, 2, 64], "fp16"), "lse": ([1, 2, 4], "fp32")}
    return [tensor(n, s, d, **over.get(n, {})) for n, (s, d) in t.items()]


def main():
    c = os.path.join(HERE, "corpus", "fuzz_c_api")
    ref = '{"impl": "reference"}'
    seeds = {
        "gqa_ok": call("gqa_fwd", ref, gqa()),
        "gqa_plan": call("gqa_fwd", ref, gqa(), how=2),
        "gqa_kernel": call("gqa_fwd", '{"impl": "kernel"}', gqa(**{n: {"device": "cuda"} for n in "q k v o lse".split()}),
                           reference=False),
        "gqa_null_data": call("gqa_fwd", ref, gqa(q={"null_data": True})),
        "gqa_null_shape": call("gqa_fwd", ref, gqa(k={"null_shape": True})),
        "gqa_ndim9": call("gqa_fwd", ref, gqa(q={"ndim": 9})),
        "gqa_offset63": call("gqa_fwd", ref, gqa(o={"byte_offset": 1 << 63})),
        "gqa_strides62": call("gqa_fwd", ref, gqa(q={"strides": [1 << 62, 1 << 62, 64, 1]})),
        "gqa_foreign_device": call("gqa_fwd", ref, gqa(v={"device": "foreign"})),
        "gqa_window_1e300": call("gqa_fwd", '{"impl": "reference", "window_size_left": 1e300}', gqa()),
        "gqa_deep": call("gqa_fwd", '{"impl": "reference", "x": ' + "[" * 2000 + "]" * 2000 + "}", gqa()),
        "gqa_dup": call("gqa_fwd", ref, gqa()[:4] + [tensor("o", [1, 2, 4], "fp32")]),
        "topk_select": call("topk_select", '{"topk": 2}', [tensor("index_score", [1, 4, 8, 1], "fp32"),
                                                         tensor("indexes", [1, 4, 1, 2], "int32")], splice=True),
        "topk_select_skv0": call("topk_select", '{"topk": 2}', [tensor("index_score", [1, 4, 0, 1], "fp32",
                                                                       strides=[4, 1, 1, 1]),
                                                              tensor("indexes", [1, 4, 1, 2], "int32")], splice=True),
        "pkw": call("paged_kv_write", ref, [tensor("k", [3, 1, 16], "fp16"), tensor("v", [3, 1, 16], "fp16"),
                                            tensor("k_pages", [4, 1, 1, 16], "fp16"),
                                            tensor("v_pages", [4, 1, 1, 16], "fp16"),
                                            tensor("slot_mapping", [3], "int64")], how=1),
        "li_topk0": call("lightning_indexer", '{"topk": 0}', [tensor("q", [1, 4, 2, 64], "fp16"),
                                                            tensor("k", [1, 4, 64], "fp16"),
                                                            tensor("weights", [1, 4, 2], "fp16"),
                                                            tensor("indices", [1, 4, 0], "int32", strides=[4, 1, 1])],
                         splice=True),
        "bsa_huge": call("bsa_fwd", ref, [tensor("q", [1, 1, 1 << 40, 64], "bf16"),
                                         tensor("k", [1, 1, 1 << 40, 64], "bf16")]),
    }
    for name, b in seeds.items():
        open(os.path.join(c, name), "wb").write(b)

    c = os.path.join(HERE, "corpus", "fuzz_cache")
    # Layout: entries, then per entry key-choice, cubin (u16 length + bytes), kind, manifest choice, ...
    def entry(good_key=1, cubin=b"\x7fELF" * 8, kind=3, how=2, files=(4, 4, 4), field=None, value=b""):
        b = bytes([good_key]) + struct.pack("<H", len(cubin)) + cubin + bytes([kind])
        if kind % 6 >= 3:
            b += bytes([how])
            if how % 3 == 1:
                b += struct.pack("<H", len(value)) + value + bytes([field])
            elif how % 3 == 0:
                b += struct.pack("<H", len(value)) + value
            b += bytes(files)
        return b
    seeds = {
        "one_good": bytes([0]) + entry() + bytes([0, 1, 1, 2]),
        "wrong_types": bytes([3]) + entry(how=1, field=0, value=b"12345") + entry(how=1, field=4, value=b'"1000"')
        + entry(how=1, field=2, value=b"5") + entry(how=1, field=1, value=b"false") + bytes([1, 1, 1, 0]),
        "links_and_fifo": bytes([3]) + entry(kind=0) + entry(kind=1) + entry(files=(4, 1, 4)) + entry(kind=2)
        + bytes([1, 1, 0, 1]),
        "raw_manifest": bytes([0]) + entry(how=0, value=b'{"key": [1, {"a": null}], "cubin_bytes": -1}') + bytes([0, 1, 1, 3]),
        "copied_key": bytes([0]) + entry(good_key=0) + bytes([0, 1, 1, 2]),
    }
    for name, b in seeds.items():
        open(os.path.join(c, name), "wb").write(b)

    c = os.path.join(HERE, "corpus", "fuzz_case_file")
    good = json.load(open(os.path.join(HERE, "..", "cli", "good_case.json")))
    open(os.path.join(c, "good"), "w").write(json.dumps(good))
    mal = os.path.join(HERE, "..", "cli", "malformed_cases")
    for f in sorted(os.listdir(mal)):
        text = open(os.path.join(mal, f)).read()
        if len(text) > 8192:
            text = text[:4000]  # the deep file: its prefix is deep enough
        open(os.path.join(c, f.replace(".json", "")), "w").write(text)


if __name__ == "__main__":
    main()
