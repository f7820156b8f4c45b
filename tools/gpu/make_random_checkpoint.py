#!/usr/bin/env python3
"""A Hugging Face checkpoint of a real model's shape with random bf16 weights, for serving benchmarks
(`specserve bench serve-load --model OUT`) on the GPU machine, where PyTorch and transformers are installed.

    python3 tools/gpu/make_random_checkpoint.py --shape qwen3-8b --tokenizer-from DIR OUT

The weights are drawn on the GPU (N(0, 0.02) for matrices, transformers' init for the rest) with a fixed
seed and saved as safetensors shards; the tokenizer files (tokenizer.json, tokenizer_config.json) are copied
from DIR, which must hold a tokenizer whose ids fit the shape's vocabulary (a Qwen3 tokenizer for
qwen3-8b). The shapes are those of `specserve bench steps --synthetic` (src/model/synthetic_shapes.cpp).
"""
import argparse
import os
import shutil
import sys
import time

SHAPES = {
    "qwen3-8b": dict(vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-8b")
    ap.add_argument("--tokenizer-from", required=True, help="directory holding tokenizer.json (+ tokenizer_config.json)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    src = args.tokenizer_from
    if not os.path.isfile(os.path.join(src, "tokenizer.json")):
        print(f"{src}: no tokenizer.json", file=sys.stderr)
        return 2

    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    start = time.time()
    config = Qwen3Config(**SHAPES[args.shape], max_position_embeddings=131072, rms_norm_eps=1e-6,
                         rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                         tie_word_embeddings=False)
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(mean=0.0, std=0.02)
    model.save_pretrained(args.out, safe_serialization=True, max_shard_size="4GB")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if os.path.isfile(os.path.join(src, name)):
            shutil.copy(os.path.join(src, name), os.path.join(args.out, name))
    print(f"{args.out}: random {args.shape} ({sum(p.numel() for p in model.parameters()) / 1e9:.2f}B parameters) "
          f"in {time.time() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
