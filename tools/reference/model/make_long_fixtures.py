#!/usr/bin/env python3
"""Builds the long-context target-model fixtures of tests/fixtures/model/ with Hugging Face transformers.

Parity beyond 16k positions (RoPE angles at large positions with rope_theta 1e6, softmax over ~16k keys,
the KV cache paged over ~1,000 blocks, a DeltaNet prefill of ~260 chunks): a tiny random model, a random
prompt of PROMPT_LEN = 16,500 tokens (> 16,384), and what transformers computes for it in fp32 on the CPU
with the "eager" attention (the plain matmul + fp32 softmax path; one forward over the whole prompt).
To keep the fixture small, only the logits at a handful of positions are stored, not all of them.

Each fixture directory holds config.json + model.safetensors (save_pretrained) and reference.safetensors:

  prompt_ids        I64 [P]        random prompt, P = PROMPT_LEN
  positions         I64 [K]        prompt positions whose logits are stored (ascending): 0, chunk edges of a
                                   2048-token prefill, 16,383 / 16,384 / 16,385, and the last 8
  position_logits   F32 [K, V]     the logits at those positions (the prompt's one prefill forward)
  greedy_ids        I64 [D]        greedy continuation after the prompt (argmax, first index on ties)
  decode_logits     F32 [D, V]     logits of the D single-token decode steps (row i: after feeding
                                   greedy_ids[i] at position P + i, i.e. the distribution of greedy_ids[i+1])

The metadata records the attention implementation, the versions, a reload check and the smallest top-2
logit margin over the stored rows (how robust greedy is to rounding).

Fixtures:
  qwen3_long     Qwen3ForCausalLM, 2 layers, 1 query / 1 KV head of dim 32 (full RoPE), tied embeddings
  qwen3_5_long   Qwen3_5ForCausalLM (flat layout), 1 Gated DeltaNet + 1 gated attention layer with 2 query /
                 1 KV head of dim 32 (GQA, partial RoPE, output gate), tied embeddings

Few attention heads on purpose: the C++ test prefills 16,500 tokens four times (two fixtures, f32 and
bf16 KV cache) on CI's 2 cores, and the CPU attention's cost is (query heads x attention layers x P^2/2).

Run (CPU; needs torch, transformers >= 5, safetensors; about 1-2 minutes and ~6 GB of memory at peak:
eager attention materialises the heads x 16,500^2 fp32 score matrix of a layer):
  python3 tools/reference/model/make_long_fixtures.py tests/fixtures/model
Writes OUTDIR/<fixture>/... and OUTDIR/long_fixtures.tar (both fixtures) and prints a summary.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (sets the offline / CPU environment, imports torch)

import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

VOCAB = 256
HIDDEN = 64
PROMPT_LEN = 16500   # > 16,384; not a multiple of 64 (the DeltaNet prefill ends on a partial chunk)
DECODE_STEPS = 8
INIT_RANGE = 0.5
MAX_POSITIONS = 32768
ROPE_THETA = 1000000.0
ATTENTION = "eager"
POSITIONS = sorted({0, 1, 2047, 2048, 4095, 8192, 16383, 16384, 16385}
                   | set(range(PROMPT_LEN - 8, PROMPT_LEN)))

torch.set_grad_enabled(False)
torch.set_default_dtype(torch.float32)


def reference(model, gen):
    prompt = torch.randint(0, VOCAB, (PROMPT_LEN,), generator=gen)
    positions = torch.tensor(POSITIONS, dtype=torch.int64)
    out = model(input_ids=prompt[None], use_cache=True)
    logits = mf.logits_of(out)
    position_logits = logits[positions].contiguous()
    cache = out.past_key_values
    del out, logits

    greedy, decode_logits = [], []
    last = position_logits[-1]
    for _ in range(DECODE_STEPS):
        tok = int(torch.argmax(last))  # first maximal index: ties go to the lowest id
        greedy.append(tok)
        out = model(input_ids=torch.tensor([[tok]]), past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        last = mf.logits_of(out)[-1]
        decode_logits.append(last)
    decode_logits = torch.stack(decode_logits)

    rows = torch.cat([position_logits, decode_logits])
    top2 = torch.topk(rows, 2, dim=-1).values
    margin = float((top2[:, 0] - top2[:, 1]).min())
    return {
        "prompt_ids": prompt.to(torch.int64),
        "positions": positions,
        "position_logits": position_logits,
        "greedy_ids": torch.tensor(greedy, dtype=torch.int64),
        "decode_logits": decode_logits.contiguous(),
    }, margin


def check_reload(cls, path, refs):
    """Reloads the saved directory and checks the stored prompt rows (guards save/tie mistakes)."""
    m = mf.eager(cls.from_pretrained(path, dtype=torch.float32))
    logits = mf.logits_of(m(input_ids=refs["prompt_ids"][None]))[refs["positions"]]
    return float((logits - refs["position_logits"]).abs().max())


def finish(cls, model, path, gen, meta):
    model.save_pretrained(path)
    t0 = time.time()
    refs, margin = reference(model, gen)
    seconds = time.time() - t0
    meta.update({"attention": ATTENTION, "prompt_len": PROMPT_LEN, "min_top2_margin": margin,
                 "reload_max_abs_diff": check_reload(cls, path, refs), "reference_seconds": round(seconds, 1),
                 "transformers": transformers.__version__, "torch": torch.__version__})
    mf.save_reference(path, refs, meta)
    return meta


def make_qwen3_long(outdir, name, seed):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    cfg = transformers.Qwen3Config(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=1, num_key_value_heads=1, head_dim=32, max_position_embeddings=MAX_POSITIONS,
        rms_norm_eps=1e-6, initializer_range=INIT_RANGE, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA},
        bos_token_id=1, eos_token_id=2)
    model = mf.eager(transformers.Qwen3ForCausalLM(cfg))
    mf.perturb_norms(model, gen, False)
    return finish(transformers.Qwen3ForCausalLM, model, os.path.join(outdir, name), gen,
                  {"family": "qwen3", "tied": True})


def make_qwen3_5_long(outdir, name, seed):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    cfg = transformers.Qwen3_5TextConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=MAX_POSITIONS,
        rms_norm_eps=1e-6, initializer_range=INIT_RANGE, tie_word_embeddings=True,
        layer_types=["linear_attention", "full_attention"],
        linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
        linear_num_key_heads=2, linear_num_value_heads=4,
        rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA, "partial_rotary_factor": 0.25,
                         "mrope_section": [2, 1, 1], "mrope_interleaved": True},
        bos_token_id=1, eos_token_id=2)
    model = mf.eager(transformers.Qwen3_5ForCausalLM(cfg))
    mf.perturb_norms(model, gen, True)
    mf.tune_deltanet(model, gen)
    return finish(transformers.Qwen3_5ForCausalLM, model, os.path.join(outdir, name), gen,
                  {"family": "qwen3_5", "layout": "flat", "tied": True})


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "long_fixtures_out"
    os.makedirs(outdir, exist_ok=True)
    print("torch", torch.__version__, "transformers", transformers.__version__, flush=True)
    jobs = [
        ("qwen3_long", lambda: make_qwen3_long(outdir, "qwen3_long", seed=21)),
        ("qwen3_5_long", lambda: make_qwen3_5_long(outdir, "qwen3_5_long", seed=22)),
    ]
    summary = mf.run_jobs(outdir, jobs, "long_summary.json", "long_fixtures.tar")
    sys.exit(1 if any("error" in v for v in summary.values()) else 0)


if __name__ == "__main__":
    main()
