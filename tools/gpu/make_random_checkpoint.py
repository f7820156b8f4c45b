#!/usr/bin/env python3
"""A Hugging Face checkpoint of a real model's shape with random bf16 weights, for serving benchmarks
(`specserve bench serve-load --model OUT`) on the GPU machine, where PyTorch and transformers are installed.

    python3 tools/gpu/make_random_checkpoint.py --shape qwen3-8b|qwen3.6-27b --tokenizer-from DIR OUT

The weights are drawn on the GPU (N(0, 0.02) for matrices, transformers' init for the rest) with a fixed
seed and saved as safetensors shards; the tokenizer files (tokenizer.json, tokenizer_config.json) are copied
from DIR, which must hold a tokenizer whose ids fit the shape's vocabulary (a Qwen3 tokenizer for
qwen3-8b; any tokenizer of fewer ids fits too, e.g. the demo pair's). The shapes are those of `specserve bench steps --synthetic` (src/model/synthetic_shapes.cpp).
"""
import argparse
import os
import shutil
import sys
import time

SHAPES = {
    "qwen3-8b": dict(vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128),
    # Qwen3.6-27B's text model: 16 x (3 Gated DeltaNet layers + 1 gated attention layer).
    "qwen3.6-27b": dict(vocab_size=248320, hidden_size=5120, intermediate_size=17408, num_hidden_layers=64,
                        num_attention_heads=24, num_key_value_heads=4, head_dim=256,
                        layer_types=[t for _ in range(16) for t in ("linear_attention",) * 3 + ("full_attention",)],
                        linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_value_head_dim=128,
                        linear_num_key_heads=16, linear_num_value_heads=48),
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
    import transformers

    start = time.time()
    if args.shape == "qwen3-8b":
        config = transformers.Qwen3Config(**SHAPES[args.shape], max_position_embeddings=131072, rms_norm_eps=1e-6,
                                          rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                                          tie_word_embeddings=False)
        model_class = transformers.Qwen3ForCausalLM
    else:
        config = transformers.Qwen3_5TextConfig(
            **SHAPES[args.shape], max_position_embeddings=262144, rms_norm_eps=1e-6, tie_word_embeddings=False,
            rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25})
        model_class = transformers.Qwen3_5ForCausalLM
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    # Made in bf16 directly: the 27B's f32 parameters would not fit beside it.
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(device):
        model = model_class(config)
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
