#!/usr/bin/env python3
"""Reference fixtures for specserve's sampling processors, from Hugging Face transformers.

Runs transformers' RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper,
TopPLogitsWarper and MinPLogitsWarper (alone and chained in HF's order) on random float32 logits
rows and records inputs and outputs as JSON for tests/sampling/test_hf_fixtures.cpp.

Inputs are drawn with Python's own RNG (not torch's) so the cases are the same wherever this runs,
and re-drawn when a truncation boundary falls within 1e-4 of a threshold: there f32 (HF) and f64
(specserve) mass sums may legitimately disagree, and the fixture should test semantics, not
rounding. Top-k rows have no ties at the k-th value (HF keeps ties, specserve keeps exactly k).

    python3 make_fixtures.py --out hf_logits_processors.json            # needs torch + transformers
    python3 make_fixtures.py --out /tmp/selfcheck.json --self-check     # no torch: pure-Python
                                                                        # reference, for testing

-inf is written as null (JSON has no infinities). Floats are written as the exact f32 value.
"""
import argparse
import json
import math
import random
import struct
import sys

NEG_INF = float("-inf")
MARGIN = 1e-4


def f32(x):
    """Rounds a Python float to the nearest float32 value (kept as a Python float)."""
    if math.isinf(x):
        return x
    return struct.unpack("f", struct.pack("f", x))[0]


# ---------------------------------------------------------------------------------------------
# Pure-Python statements of HF's semantics: used to choose inputs away from boundaries, and as the
# reference in --self-check mode. Arithmetic that HF does in f32 is rounded to f32 here.
# ---------------------------------------------------------------------------------------------

def softmax(scores):
    m = max(scores)
    w = [math.exp(s - m) if s != NEG_INF else 0.0 for s in scores]
    t = sum(w)
    return [x / t for x in w]


def py_repetition(scores, input_ids, penalty):
    out = list(scores)
    for i in set(input_ids):
        s = scores[i]
        out[i] = f32(s * penalty) if s < 0 else f32(s / penalty)
    return out


def py_temperature(scores, t):
    return [f32(s / t) if s != NEG_INF else s for s in scores]


def py_top_k(scores, k):
    k = min(k, len(scores))
    kth = sorted(scores, reverse=True)[k - 1]
    return [s if s >= kth else NEG_INF for s in scores]


def py_top_p(scores, top_p):
    p = softmax(scores)
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    out = [NEG_INF] * len(scores)
    before = 0.0
    for j, i in enumerate(order):
        if j > 0 and before >= top_p:
            break
        out[i] = scores[i]
        before += p[i]
    return out


def py_min_p(scores, min_p):
    p = softmax(scores)
    pmax = max(p)
    return [s if p[i] >= min_p * pmax else NEG_INF for i, s in enumerate(scores)]


def top_p_margin_ok(scores, top_p):
    p = softmax(scores)
    before = 0.0
    for i in sorted(range(len(scores)), key=lambda i: (-scores[i], i)):
        if p[i] == 0.0:
            break
        if abs(before - top_p) < MARGIN:
            return False
        before += p[i]
    return True


def min_p_margin_ok(scores, min_p):
    p = softmax(scores)
    pmax = max(p)
    return all(abs(x / pmax - min_p) >= MARGIN for x in p if x > 0.0)


def top_k_margin_ok(scores, k):
    finite = sorted((s for s in scores if s != NEG_INF), reverse=True)
    return k >= len(finite) or finite[k - 1] - finite[k] > 1e-6


# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------

def random_row(rng, vocab, scale):
    return [f32(rng.gauss(0.0, scale)) for _ in range(vocab)]


def random_ids(rng, vocab, n):
    # Draw from a small range so ids repeat (the penalty must apply once per distinct id).
    hi = max(2, vocab // 3)
    return [rng.randrange(hi) for _ in range(n)]


def chain(scores, input_ids, prm):
    """HF's order: repetition penalty, then the warpers temperature, top-k, top-p, min-p."""
    s = py_repetition(scores, input_ids, prm["repetition_penalty"])
    s = py_temperature(s, prm["temperature"])
    steps = []
    if prm.get("top_k", 0) > 0:
        steps.append(("top_k", s))
        s = py_top_k(s, prm["top_k"])
    if prm.get("top_p", 1.0) < 1.0:
        steps.append(("top_p", s))
        s = py_top_p(s, prm["top_p"])
    if prm.get("min_p", 0.0) > 0.0:
        steps.append(("min_p", s))
        s = py_min_p(s, prm["min_p"])
    return s, steps


def chain_margin_ok(scores, input_ids, prm):
    _, steps = chain(scores, input_ids, prm)
    for name, before in steps:
        if name == "top_k" and not top_k_margin_ok(before, prm["top_k"]):
            return False
        if name == "top_p" and not top_p_margin_ok(before, prm["top_p"]):
            return False
        if name == "min_p" and not min_p_margin_ok(before, prm["min_p"]):
            return False
    return True


def make_cases():
    rng = random.Random(20240611)
    cases = []

    def draw(name, processor, params, vocab, scale, n_ids, ok=lambda s, ids: True):
        for _ in range(1000):
            scores = random_row(rng, vocab, scale)
            ids = random_ids(rng, vocab, n_ids)
            if ok(scores, ids):
                cases.append({"name": name, "processor": processor, "params": params,
                              "input_ids": ids, "scores": scores})
                return
        raise RuntimeError(f"no input away from the boundaries for {name}")

    for penalty in (1.3, 0.7, 2.0):
        for vocab in (16, 200):
            draw(f"repetition_{penalty}_v{vocab}", "repetition_penalty", {"penalty": penalty}, vocab, 3.0, 24)
    for t in (0.5, 0.7, 1.3, 2.0):
        draw(f"temperature_{t}", "temperature", {"temperature": t}, 64, 4.0, 1)
    for k in (1, 5, 20, 63):
        draw(f"top_k_{k}", "top_k", {"top_k": k}, 64, 2.0, 1, lambda s, ids, k=k: top_k_margin_ok(s, k))
    for p in (0.1, 0.5, 0.9, 0.95):
        for vocab, scale in ((64, 2.0), (512, 0.5)):
            draw(f"top_p_{p}_v{vocab}", "top_p", {"top_p": p}, vocab, scale, 1,
                 lambda s, ids, p=p: top_p_margin_ok(s, p))
    for m in (0.02, 0.1, 0.5):
        for vocab, scale in ((64, 2.0), (512, 1.0)):
            draw(f"min_p_{m}_v{vocab}", "min_p", {"min_p": m}, vocab, scale, 1,
                 lambda s, ids, m=m: min_p_margin_ok(s, m))
    chains = [
        {"repetition_penalty": 1.3, "temperature": 0.7, "top_k": 20, "top_p": 0.9, "min_p": 0.05},
        {"repetition_penalty": 1.0, "temperature": 0.6, "top_k": 20, "top_p": 0.95, "min_p": 0.0},
        {"repetition_penalty": 1.2, "temperature": 1.5, "top_k": 0, "top_p": 0.8, "min_p": 0.1},
        {"repetition_penalty": 0.8, "temperature": 1.0, "top_k": 50, "top_p": 1.0, "min_p": 0.2},
        {"repetition_penalty": 1.5, "temperature": 0.9, "top_k": 0, "top_p": 0.5, "min_p": 0.0},
    ]
    for i, prm in enumerate(chains):
        vocab = 256 if i % 2 == 0 else 64
        draw(f"chain_{i}", "chain", prm, vocab, 2.0, 30,
             lambda s, ids, prm=prm: chain_margin_ok(s, ids, prm))
    return cases


def python_reference(case):
    prm, s, ids = case["params"], case["scores"], case["input_ids"]
    proc = case["processor"]
    if proc == "repetition_penalty":
        return py_repetition(s, ids, prm["penalty"])
    if proc == "temperature":
        return py_temperature(s, prm["temperature"])
    if proc == "top_k":
        return py_top_k(s, prm["top_k"])
    if proc == "top_p":
        return py_top_p(s, prm["top_p"])
    if proc == "min_p":
        return py_min_p(s, prm["min_p"])
    if proc == "chain":
        out, _ = chain(s, ids, prm)
        return softmax(out)
    raise ValueError(proc)


def hf_reference(cases):
    import torch
    import transformers
    try:
        from transformers.generation.logits_process import (
            MinPLogitsWarper, RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper,
            TopPLogitsWarper)
    except ImportError:
        from transformers import (MinPLogitsWarper, RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper,
                                  TopKLogitsWarper, TopPLogitsWarper)

    def run(processors, ids, scores):
        input_ids = torch.tensor([ids], dtype=torch.long)
        x = torch.tensor([scores], dtype=torch.float32)
        for p in processors:
            x = p(input_ids, x)
        return x

    outputs = []
    for case in cases:
        prm, proc = case["params"], case["processor"]
        if proc == "repetition_penalty":
            procs = [RepetitionPenaltyLogitsProcessor(penalty=prm["penalty"])]
        elif proc == "temperature":
            procs = [TemperatureLogitsWarper(temperature=prm["temperature"])]
        elif proc == "top_k":
            procs = [TopKLogitsWarper(top_k=prm["top_k"])]
        elif proc == "top_p":
            procs = [TopPLogitsWarper(top_p=prm["top_p"])]
        elif proc == "min_p":
            procs = [MinPLogitsWarper(min_p=prm["min_p"])]
        else:  # chain, in the order generate() builds it
            procs = []
            if prm["repetition_penalty"] != 1.0:
                procs.append(RepetitionPenaltyLogitsProcessor(penalty=prm["repetition_penalty"]))
            procs.append(TemperatureLogitsWarper(temperature=prm["temperature"]))
            if prm["top_k"] > 0:
                procs.append(TopKLogitsWarper(top_k=prm["top_k"]))
            if prm["top_p"] < 1.0:
                procs.append(TopPLogitsWarper(top_p=prm["top_p"]))
            if prm["min_p"] > 0.0:
                procs.append(MinPLogitsWarper(min_p=prm["min_p"]))
        out = run(procs, case["input_ids"], case["scores"])
        if proc == "chain":
            out = torch.softmax(out, dim=-1)
        outputs.append([float(v) for v in out[0].tolist()])
    return outputs, f"transformers {transformers.__version__}, torch {torch.__version__}"


def encode(values):
    return [None if v == NEG_INF else v for v in values]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--self-check", action="store_true", help="use the pure-Python reference (no torch)")
    args = ap.parse_args()

    cases = make_cases()
    if args.self_check:
        expected = [python_reference(c) for c in cases]
        reference = "pure-Python self-check (not a fixture)"
    else:
        expected, reference = hf_reference(cases)
        # Cross-check the statements above against HF, to catch a changed HF semantics early.
        disagree = 0
        for c, e in zip(cases, expected):
            mine = python_reference(c)
            if c["processor"] == "chain":
                bad = any(abs(a - b) > 1e-5 for a, b in zip(mine, e))
            else:
                bad = any((a == NEG_INF) != (b == NEG_INF) or (a != NEG_INF and abs(a - b) > 1e-5 * max(1, abs(b)))
                          for a, b in zip(mine, e))
            if bad:
                disagree += 1
                print(f"note: pure-Python statement differs from HF on {c['name']}", file=sys.stderr)
        print(f"{len(cases)} cases; pure-Python statement differs from HF on {disagree}", file=sys.stderr)

    doc = {
        "generator": "tools/reference/sampling/make_fixtures.py",
        "reference": reference,
        "cases": [dict(c, scores=encode(c["scores"]), expected=encode(e)) for c, e in zip(cases, expected)],
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out} ({len(cases)} cases, {reference})", file=sys.stderr)


if __name__ == "__main__":
    main()
