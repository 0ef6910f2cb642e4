#!/usr/bin/env python3
"""Writes tests/cli/malformed_cases/*.json: case files `attnjit test` must reject cleanly (exit 1, a FAIL
line naming the file, no crash). Each starts from one valid paged_kv_write case (good.json, which must
pass) and breaks one rule. Run from the repository root; the output is committed."""
import copy
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "malformed_cases")

GOOD = {
    "name": "malformed-base/pkw", "op": "paged_kv_write", "config": {}, "seed": 1,
    "tensors": {
        "k": {"shape": [3, 1, 16], "dtype": "fp16", "init": {"kind": "normal", "mean": 0.0, "std": 1.0}},
        "v": {"shape": [3, 1, 16], "dtype": "fp16", "init": {"kind": "normal", "mean": 0.0, "std": 1.0}},
        "k_pages": {"shape": [4, 1, 1, 16], "dtype": "fp16", "init": {"kind": "bytes", "pattern": 165}, "output": True},
        "v_pages": {"shape": [4, 1, 1, 16], "dtype": "fp16", "init": {"kind": "bytes", "pattern": 165}, "output": True},
        "slot_mapping": {"shape": [3], "dtype": "int64", "init": {"kind": "values", "values": [2, 0, 3]}},
    },
    "compare": {"k_pages": {"mode": "bitwise"}, "v_pages": {"mode": "bitwise"}},
}


def case(mutate):
    c = copy.deepcopy(GOOD)
    mutate(c)
    return {"cases": [c]}


def main():
    os.makedirs(OUT, exist_ok=True)
    files = {
        "nine_dims": case(lambda c: c["tensors"]["k"].update(shape=[1] * 9)),
        "fractional_shape": case(lambda c: c["tensors"]["k"].update(shape=[3, 1, 15.5])),
        "negative_shape": case(lambda c: c["tensors"]["k"].update(shape=[3, -1, 16])),
        "string_shape": case(lambda c: c["tensors"]["k"].update(shape=["3", 1, 16])),
        "huge_shape": case(lambda c: c["tensors"]["k"].update(shape=[1 << 40, 1 << 40, 16])),
        "golden_misspelt": case(lambda c: c.update(golden={"k_page": {"values": [0.0] * 64}})),
        "golden_number": case(lambda c: c.update(golden=5)),
        "golden_no_values": case(lambda c: c.update(golden={"k_pages": {"bitz": [1]}})),
        "config_list": case(lambda c: c.update(config=[1, 2])),
        "config_string": case(lambda c: c.update(config="is_causal")),
        "op_number": case(lambda c: c.update(op=7)),
        "tensor_not_object": case(lambda c: c["tensors"].update(k=[3, 1, 16])),
        "strides_fractional": case(lambda c: c["tensors"]["k"].update(strides=[16, 16, 0.5])),
        # Numbers read as integers must be JSON integers in range (a float past the range is UB to convert).
        "byte_pattern_huge": case(lambda c: c["tensors"]["k_pages"]["init"].update(pattern=1.1e38)),
        "byte_pattern_256": case(lambda c: c["tensors"]["k_pages"]["init"].update(pattern=256)),
        "int_values_float": case(lambda c: c["tensors"]["slot_mapping"]["init"].update(values=[2, 1e300, 3])),
        "int_values_fraction": case(lambda c: c["tensors"]["slot_mapping"]["init"].update(values=[2, 0.5, 3])),
        "int32_values_range": case(lambda c: c["tensors"]["slot_mapping"].update(
            dtype="int32", init={"kind": "values", "values": [2, 1 << 40, 3]})),
        "slots_capacity_float": case(lambda c: c["tensors"]["slot_mapping"].update(
            init={"kind": "slots", "capacity": 1e300})),
        "slots_int32_capacity": case(lambda c: c["tensors"]["slot_mapping"].update(
            dtype="int32", init={"kind": "slots", "capacity": 1 << 40})),
        "seed_float": case(lambda c: c.update(seed=1e300)),
        "seed_negative": case(lambda c: c.update(seed=-1)),
        "rows_range_float": case(lambda c: c["tensors"]["k_pages"].update(
            init={"kind": "rows", "ranges": [[0, 1e300]], "init": {"kind": "bytes", "pattern": 1}})),
        "normal_std_negative": case(lambda c: c["tensors"]["k"]["init"].update(std=-1.0)),
        "uniform_low_above_high": case(lambda c: c["tensors"]["k"].update(
            init={"kind": "uniform", "low": 1.0, "high": -1.0})),
        "float_values_string": case(lambda c: c["tensors"]["k"].update(
            init={"kind": "values", "values": [[1.0]] * 48})),
    }
    files["empty_case_list"] = {"cases": []}
    files["cases_not_list"] = {"cases": {"a": 1}}
    files["case_not_object"] = {"cases": [5]}
    files["top_level_list"] = [GOOD]
    for name, j in files.items():
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump(j, f)
            f.write("\n")
    with open(os.path.join(OUT, "deep_nesting.json"), "w") as f:
        f.write('{"cases": [' + "[" * 100000 + "]" * 100000 + "]}\n")
    with open(os.path.join(os.path.dirname(OUT), "good_case.json"), "w") as f:
        json.dump({"cases": [GOOD]}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
