#!/usr/bin/env python3
"""Stage 2: the byte-level BPE tokenizer, and the packed token streams of the corpus.

Trains a byte-level BPE with HF `tokenizers` (the Rust trainer) in the exact Qwen2/Qwen3 layout (docs/MODELS.md §4.1):
NFC normalizer; pre-tokenizer Sequence[Split(Qwen2 regex, Isolated), ByteLevel(add_prefix_space false,
use_regex false)]; BPE without byte fallback or unk; ByteLevel post-processor and decoder. The 256 byte symbols
take ids 0..255 in code-point order (as in Qwen), the merges follow, and the added special tokens come last:
<|endoftext|>, <|im_start|>, <|im_end|>, <|mask|> (the drafter's mask token; never in any text).

Writes OUT/tokenizer.json and OUT/tokenizer_config.json (eos <|im_end|>, pad <|endoftext|>, a ChatML template),
then encodes the corpus into DATA/{train,val}.bin (uint16 token stream, each file followed by <|endoftext|>),
DATA/{train,val}_docs.npy (int64 [n, 2] start/end of each file's tokens, without the separator) and
DATA/meta.json.

Usage: python3 tools/train/tokenizer.py --corpus work/corpus --out work/tokenizer --data work/data --vocab 8192
Needs: tokenizers, numpy (transformers optional: used to check that AutoTokenizer loads the result).
"""
import argparse
import json
import os
import sys
import time
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (CHAT_TEMPLATE, EOT, IM_END, QWEN2_PATTERN, SPECIAL_TOKENS, read_jsonl,  # noqa: E402
                    write_json)

BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}


def train(texts, vocab_size, min_frequency):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False, fuse_unk=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(SPECIAL_TOKENS), min_frequency=min_frequency, show_progress=False,
        special_tokens=[], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    return tok


def canonical_json(tok):
    """The trained tokenizer as a dict in the exact HF / Qwen2 layout (field values and order)."""
    raw = json.loads(tok.to_str())
    model = raw["model"]
    n = len(model["vocab"])
    added = [{"id": n + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(SPECIAL_TOKENS)]
    merges = model["merges"]
    if merges and isinstance(merges[0], str):          # older serialisation "a b" -> ["a", "b"]
        merges = [m.split(" ", 1) for m in merges]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": False},
            dict(BYTE_LEVEL)]},
        "post_processor": dict(BYTE_LEVEL),
        "decoder": dict(BYTE_LEVEL),
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": model["vocab"], "merges": merges},
    }


def tokenizer_config(tj, max_len):
    added = {str(a["id"]): {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word",
                                                "special")} for a in tj["added_tokens"]}
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": [t for t in SPECIAL_TOKENS if t != EOT],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": IM_END,
        "errors": "replace",
        "model_max_length": max_len,
        "pad_token": EOT,
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def check_layout(tok):
    """Ids 0..255 are the byte symbols in code-point order; the specials are the last ids."""
    from tokenizers import pre_tokenizers
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet(), key=ord)
    for i, ch in enumerate(alphabet):
        assert tok.token_to_id(ch) == i, (i, ch, tok.token_to_id(ch))
    n = tok.get_vocab_size()
    for i, t in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(t) == n - len(SPECIAL_TOKENS) + i, (t, tok.token_to_id(t))


def encode_split(tok, texts, eot_id, batch=2000):
    import numpy as np
    chunks, docs, pos = [], [], 0
    for i in range(0, len(texts), batch):
        for enc in tok.encode_batch(texts[i:i + batch], add_special_tokens=False):
            ids = enc.ids
            docs.append((pos, pos + len(ids)))
            chunks.append(np.asarray(ids + [eot_id], dtype=np.uint16))
            pos += len(ids) + 1
    stream = np.concatenate(chunks) if chunks else np.zeros(0, np.uint16)
    return stream, np.asarray(docs, dtype=np.int64).reshape(-1, 2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="folder written by corpus.py")
    ap.add_argument("--out", required=True, help="tokenizer folder (tokenizer.json, tokenizer_config.json)")
    ap.add_argument("--data", required=True, help="folder for the packed token streams")
    ap.add_argument("--vocab", type=int, default=8192, help="total ids including the 4 special tokens")
    ap.add_argument("--min-frequency", type=int, default=2)
    ap.add_argument("--train-mb", type=float, default=150.0, help="text used to train the BPE (by file hash)")
    ap.add_argument("--max-len", type=int, default=8192, help="model_max_length in tokenizer_config.json")
    ap.add_argument("--from-tokenizer", help="skip training: take tokenizer.json and tokenizer_config.json from "
                    "this folder (e.g. a trained target's) and only encode the corpus with it")
    args = ap.parse_args()
    import numpy as np
    from tokenizers import Tokenizer
    t0 = time.time()

    train_recs = list(read_jsonl(os.path.join(args.corpus, "train.jsonl")))
    val_recs = list(read_jsonl(os.path.join(args.corpus, "val.jsonl")))
    os.makedirs(args.out, exist_ok=True)
    tok_path = os.path.join(args.out, "tokenizer.json")
    sample, total = [], 0
    if args.from_tokenizer:
        import shutil
        for name in ("tokenizer.json", "tokenizer_config.json"):
            src = os.path.join(args.from_tokenizer, name)
            if os.path.abspath(src) != os.path.abspath(os.path.join(args.out, name)):
                shutil.copy(src, os.path.join(args.out, name))
        tok = Tokenizer.from_file(tok_path)
        print(f"tokenizer: using {args.from_tokenizer}/tokenizer.json (no training)", flush=True)
    else:
        by_hash = sorted(train_recs, key=lambda r: r["id"])
        for r in by_hash:
            total += len(r["text"])
            if total > args.train_mb * 1e6 and sample:
                break
            sample.append(r["text"])
        print(f"tokenizer: training BPE vocab {args.vocab} on {len(sample)} files ({total / 1e6:.1f} MB)",
              flush=True)
        tok = train(sample, args.vocab, args.min_frequency)
        tj = canonical_json(tok)
        with open(tok_path, "w", encoding="utf-8") as f:
            json.dump(tj, f, ensure_ascii=False, indent=2)
            f.write("\n")
        write_json(os.path.join(args.out, "tokenizer_config.json"), tokenizer_config(tj, args.max_len))
    t_train = time.time() - t0

    # Reload what was written: that file is what the server and the later stages use.
    tok2 = Tokenizer.from_file(tok_path)
    check_layout(tok2)
    for r in val_recs[:50] + train_recs[:50]:
        a = tok.encode(r["text"], add_special_tokens=False).ids
        b = tok2.encode(r["text"], add_special_tokens=False).ids
        assert a == b, r["path"]
        assert tok2.decode(b, skip_special_tokens=False) == unicodedata.normalize("NFC", r["text"]), r["path"]
    ids = tok2.encode("<|im_start|>user\nhi<|im_end|>\n", add_special_tokens=False).ids
    assert ids[0] == tok2.token_to_id("<|im_start|>") and tok2.token_to_id("<|im_end|>") in ids, ids
    vocab = tok2.get_vocab_size()
    eot_id = tok2.token_to_id(EOT)

    hf_check = "skipped (transformers not importable)"
    try:
        from transformers import AutoTokenizer
        hf = AutoTokenizer.from_pretrained(args.out)
        probe = val_recs[0]["text"][:2000] if val_recs else "def f(x):\n    return x\n"
        same = hf(probe, add_special_tokens=False)["input_ids"] == tok2.encode(probe, add_special_tokens=False).ids
        chat = hf.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
        chat_ok = chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        hf_check = f"AutoTokenizer ids {'match' if same else 'MISMATCH'}; chat template {'ok' if chat_ok else repr(chat)}"
    except ImportError:
        pass
    except Exception as e:  # noqa: BLE001 - a report, not a gate: tokenizers itself is the reference here
        hf_check = f"AutoTokenizer failed: {type(e).__name__}: {e}"

    t1 = time.time()
    os.makedirs(args.data, exist_ok=True)
    meta = {"vocab_size": vocab, "eot_id": eot_id,
            "special_ids": {t: tok2.token_to_id(t) for t in SPECIAL_TOKENS}, "splits": {}}
    for split, recs in (("train", train_recs), ("val", val_recs)):
        texts = [r["text"] for r in recs]
        stream, docs = encode_split(tok2, texts, eot_id)
        stream.tofile(os.path.join(args.data, f"{split}.bin"))
        np.save(os.path.join(args.data, f"{split}_docs.npy"), docs)
        nbytes = sum(len(t.encode("utf-8")) for t in texts)
        meta["splits"][split] = {"files": len(texts), "tokens": int(stream.size), "bytes": nbytes,
                                 "bytes_per_token": round(nbytes / max(1, stream.size - len(texts)), 3)}
    meta["paths"] = {s: [r["path"] for r in recs] for s, recs in (("train", train_recs), ("val", val_recs))}
    meta["seconds"] = {"train_bpe": round(t_train, 1), "encode": round(time.time() - t1, 1)}
    meta["hf_check"] = hf_check
    write_json(os.path.join(args.data, "meta.json"), meta)
    write_json(os.path.join(args.out, "tokenizer_stats.json"),
               {k: v for k, v in meta.items() if k != "paths"} | {"trained_on_files": len(sample),
                                                                  "trained_on_mb": round(total / 1e6, 1)})
    s = meta["splits"]
    print(f"tokenizer: vocab {vocab} (BPE {vocab - len(SPECIAL_TOKENS)} + {len(SPECIAL_TOKENS)} special), "
          f"train {s['train']['tokens']} tokens ({s['train']['bytes_per_token']} B/token), "
          f"val {s['val']['tokens']} tokens; HF check {hf_check}; "
          f"{meta['seconds']}", flush=True)


if __name__ == "__main__":
    main()
