"""Shared helpers of the demo-coder training pipeline (tools/train/).

Pure Python at import time (no torch), so the corpus and tokenizer stages and the unit tests run without it.
"""
import hashlib
import json
import math
import os
import random
import sys
import time

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]
EOT, IM_START, IM_END, MASK = SPECIAL_TOKENS

# docs/MODELS.md §4.1: the Qwen2 / Qwen3 pre-tokenizer regex (Split, behaviour Isolated).
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def build_target_layer_ids(num_target_layers, n):
    """z-lab default rule (docs/DFLASH.md §1.3): n == 1 -> [L // 2]; else round(1 + i (L - 4) / (n - 1))."""
    if n == 1:
        return [num_target_layers // 2]
    span = num_target_layers - 4
    return [int(round(1 + i * span / (n - 1))) for i in range(n)]


def default_num_taps(num_target_layers):
    """How many target layers the drafter reads: 5 (z-lab) for deep targets, fewer for shallow ones so that
    the default rule gives distinct ids (8 layers -> 3 taps [1, 3, 5]; < 6 layers -> 1 tap)."""
    if num_target_layers >= 20:
        return 5
    if num_target_layers >= 6:
        return 3
    return 1


def loss_weights(block_size, lam=7.0):
    """Per-slot loss weights (docs/DFLASH.md §9): slot 0 -> 0, slot k >= 1 -> exp(-(k - 1) / lam)."""
    return [0.0] + [math.exp(-(k - 1) / lam) for k in range(1, block_size)]


def round_up(x, multiple):
    return (x + multiple - 1) // multiple * multiple


def sha256_text(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def split_of(digest, val_permille):
    """Deterministic train/validation split by a file's content hash (same file -> same split everywhere)."""
    bucket = int(digest[:8], 16) % 1000
    return "val" if bucket < val_permille else "train"


def seed_everything(seed):
    random.seed(seed)
    try:
        import numpy as np
        np.random.seed(seed)
    except ImportError:
        pass
    try:
        import torch
        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
    except ImportError:
        pass


class Logger:
    """Prints human lines and appends JSON records (one per line) to a log file."""

    def __init__(self, path, echo=True):
        self.path = path
        self.echo = echo
        self.t0 = time.time()
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            self.f = open(path, "w")
        else:
            self.f = None

    def log(self, **rec):
        rec.setdefault("t", round(time.time() - self.t0, 2))
        if self.f:
            self.f.write(json.dumps(rec) + "\n")
            self.f.flush()
        if self.echo:
            items = " ".join(f"{k}={_fmt(v)}" for k, v in rec.items())
            print(items, flush=True)

    def close(self):
        if self.f:
            self.f.close()


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def autocast(enabled):
    """bf16 autocast on the GPU; a no-op context elsewhere (or when disabled)."""
    import contextlib
    import torch
    if not enabled or not torch.cuda.is_available():
        return contextlib.nullcontext()
    return torch.autocast("cuda", dtype=torch.bfloat16)


def write_json(path, obj):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, default=str)
        f.write("\n")


def read_json(path):
    with open(path) as f:
        return json.load(f)


def read_jsonl(path):
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                yield json.loads(line)


def die(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(1)
