#!/usr/bin/env python3
"""DFlash reference fixtures: tiny target + drafter pairs and per-step traces of the z-lab reference loop.

Runs on the GPU machine (torch + transformers 5.17; no internet). The z-lab reference (public repo
z-lab/dflash, file dflash/model.py, MIT) is NOT part of this repository: put a copy of that one file at
$DFLASH_REF/model.py (default .ref/dflash_ref/model.py, an ignored folder) before running.

For each pair it writes, under OUT/<pair>/:
  target/       the target checkpoint (save_pretrained; weights rounded to bf16 values, stored bf16)
  draft/        the drafter checkpoint (z-lab format: config.json with dflash_config, block_size, ...)
  trace.json    prompt, per-step {pos, drafts, accepted, emitted}, generated ids, plain greedy ids, tau
  golden.safetensors  draft logits and verify logits of the first steps (f32), for numeric debugging

Pairs:
  dense-random   Qwen3 target (tied head), random drafter           — acceptance mostly 0
  dense-trained  Qwen3 target trained briefly on a synthetic language (progressions, repeated motifs),
                 drafter trained on that target's greedy outputs (GPU) — accepts often
  hybrid-trained the same for a Qwen3.5 hybrid target (flat Qwen3_5ForCausalLM layout)

Dense pairs run the reference `dflash_generate` itself (its `sample` calls are recorded to get the
per-step drafts). The reference loop cannot crop recurrent state, so for the hybrid target this script
runs the same loop with the cache rolled back by restoring a pre-verify copy and replaying the accepted
rows (docs/DFLASH.md §7.2, strategy 3); for the dense pairs it checks that this harness reproduces the
reference loop exactly.

All traces run on the CPU in fp32 (deterministic); training uses the GPU when present.
"""
import argparse
import copy
import importlib.util
import json
import math
import os
import sys

import torch
import warnings
warnings.filterwarnings("ignore")

VOCAB = 384          # embedding rows; ids >= MASK are never produced by the prompt sampler
MASK_ID = 383        # the drafter's mask token: the last embedding row
HIDDEN = 128
BLOCK = 16


def load_reference(path):
    spec = importlib.util.spec_from_file_location("dflash_reference_model", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def round_to_bf16_(model):
    """Rounds every parameter to a bf16-representable value (kept in fp32), so the checkpoint can be
    stored in bf16 (half the bytes) while fp32 computation stays exactly reproducible."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


def perturb_(model, std, gen, name_filter=None):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name_filter is None or name_filter(name):
                p.add_(torch.randn(p.shape, generator=gen) * std)


def make_dense_target(seed):
    from transformers import Qwen3Config, Qwen3ForCausalLM
    torch.manual_seed(seed)
    cfg = Qwen3Config(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=192, num_hidden_layers=6,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=1024,
        rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=True, initializer_range=0.08,
        bos_token_id=None, eos_token_id=[MASK_ID - 1], torch_dtype="float32")
    model = Qwen3ForCausalLM(cfg).float().eval()
    gen = torch.Generator().manual_seed(seed + 1)
    perturb_(model, 0.1, gen, lambda n: "norm" in n)   # norms away from exactly 1
    round_to_bf16_(model)
    return model


def make_hybrid_target(seed):
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
    torch.manual_seed(seed)
    cfg = Qwen3_5TextConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=192, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        linear_conv_kernel_dim=4, linear_key_head_dim=32, linear_value_head_dim=32,
        linear_num_key_heads=2, linear_num_value_heads=4, max_position_embeddings=1024,
        rms_norm_eps=1e-6, tie_word_embeddings=False, initializer_range=0.08,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        bos_token_id=None, eos_token_id=[MASK_ID - 1], torch_dtype="float32")
    model = Qwen3_5ForCausalLM(cfg).float().eval()
    gen = torch.Generator().manual_seed(seed + 1)
    # Zero-centred norms are initialised at 0 (weight 1 + 0): move them away so (1 + w) is exercised.
    perturb_(model, 0.1, gen, lambda n: "norm" in n or "A_log" in n or "dt_bias" in n)
    round_to_bf16_(model)
    return model


def make_drafter(ref, target_layers, layer_ids, seed, num_layers=2):
    from transformers import Qwen3Config
    torch.manual_seed(seed)
    cfg = Qwen3Config(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=192, num_hidden_layers=num_layers,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=1024,
        rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False, initializer_range=0.05,
        torch_dtype="float32")
    cfg.architectures = ["DFlashDraftModel"]
    cfg.block_size = BLOCK
    cfg.num_target_layers = target_layers
    cfg.dflash_config = {"mask_token_id": MASK_ID, "target_layer_ids": layer_ids}
    model = ref.DFlashDraftModel(cfg).float().eval()
    gen = torch.Generator().manual_seed(seed + 1)
    perturb_(model, 0.1, gen, lambda n: "norm" in n)
    round_to_bf16_(model)
    return model


def greedy_batch(target, prompts, n):
    """Plain greedy decoding (no EOS stop) of a [batch, len] prompt tensor; returns [batch, len + n]."""
    out = target(prompts, use_cache=True)
    cache = out.past_key_values
    seq = [prompts, out.logits[:, -1:].argmax(-1)]
    for _ in range(n - 1):
        out = target(seq[-1], past_key_values=cache, use_cache=True)
        seq.append(out.logits[:, -1:].argmax(-1))
    return torch.cat(seq, dim=1)


def greedy(target, prompt, n):
    return greedy_batch(target, torch.tensor([prompt]), n)[0, len(prompt):].tolist()


# ---------------------------------------------------------------------------------------------------
# A predictable target: trained briefly on a synthetic language, so its greedy continuations have
# structure a drafter can learn (random targets wander and no tiny drafter predicts them).
# ---------------------------------------------------------------------------------------------------

SYNTH_VOCAB = 300


def synthetic_batch(n, length, gen):
    """Half arithmetic progressions x_t = x_0 + t*d (mod 300), half repeats of a random period-k motif."""
    t = torch.arange(length)
    x0 = torch.randint(0, SYNTH_VOCAB, (n, 1), generator=gen)
    d = torch.randint(1, 7, (n, 1), generator=gen)
    prog = (x0 + t * d) % SYNTH_VOCAB
    k = torch.randint(3, 6, (n, 1), generator=gen)
    motif = torch.randint(0, SYNTH_VOCAB, (n, 5), generator=gen)
    rep = torch.gather(motif, 1, t.unsqueeze(0) % k)
    use_prog = torch.rand(n, 1, generator=gen) < 0.5
    return torch.where(use_prog, prog, rep)


def train_target(target, steps, seed, device):
    gen = torch.Generator().manual_seed(seed)
    target = target.to(device).train()
    opt = torch.optim.AdamW(target.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps, pct_start=0.05)
    for step in range(steps):
        x = synthetic_batch(64, 64, gen).to(device)
        loss = target(x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(target.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 500 == 0 or step == steps - 1:
            print(f"  target step {step} loss {loss.item():.4f}", flush=True)
    target = target.eval().cpu()
    round_to_bf16_(target)
    return target


# ---------------------------------------------------------------------------------------------------
# Drafter training (target alignment, random anchors, decayed per-slot loss; docs/DFLASH.md §9)
# ---------------------------------------------------------------------------------------------------

def train_drafter(ref, drafter, target, steps, seed, device):
    gen = torch.Generator().manual_seed(seed)
    target = target.to(device)
    drafter = drafter.to(device).train()
    # Target-aligned data: greedy continuations of random prompts.
    n_seq, prompt_len, cont_len = 1024, 8, 120
    prompts = synthetic_batch(n_seq, prompt_len, gen)
    with torch.no_grad():
        seqs = greedy_batch(target, prompts.to(device), cont_len)
        out = target(seqs, output_hidden_states=True)
        feats = ref.extract_context_feature(out.hidden_states, drafter.target_layer_ids)
        embed = target.get_input_embeddings()
        lm_head = target.get_output_embeddings()
    opt = torch.optim.AdamW(drafter.parameters(), lr=1e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-3, total_steps=steps, pct_start=0.05)
    lam = 7.0
    weights = torch.tensor([0.0] + [math.exp(-(k - 1) / lam) for k in range(1, BLOCK)], device=device)
    total = seqs.shape[1]
    for step in range(steps):
        idx = torch.randint(0, n_seq, (128,), generator=gen).to(device)
        a = int(torch.randint(prompt_len, total - BLOCK, (1,), generator=gen))
        block = seqs[idx, a:a + BLOCK].clone()
        labels = block.clone()
        block[:, 1:] = MASK_ID
        pos = torch.arange(0, a + BLOCK, device=device).unsqueeze(0).expand(len(idx), -1)
        hidden = drafter(target_hidden=feats[idx, :a], noise_embedding=embed(block), position_ids=pos,
                         past_key_values=None, use_cache=False, is_causal=False)
        logits = lm_head(hidden)
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1),
                                               reduction="none").view(len(idx), BLOCK)
        loss = (ce * weights).sum() / (weights.sum() * len(idx))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 200 == 0 or step == steps - 1:
            print(f"  train step {step} loss {loss.item():.4f}", flush=True)
    drafter = drafter.eval().cpu()
    round_to_bf16_(drafter)
    target.cpu()
    return drafter


# ---------------------------------------------------------------------------------------------------
# The speculative loop with explicit per-step records
# ---------------------------------------------------------------------------------------------------

class RecordingSampler:
    """Wraps the reference `sample` to record drafts (seq_len B-1) and posteriors (seq_len B)."""

    def __init__(self, ref):
        self.ref = ref
        self.original = ref.sample
        self.calls = []

    def __enter__(self):
        def wrapped(logits, temperature=0.0):
            result = self.original(logits, temperature)
            self.calls.append((logits.detach().clone(), result.detach().clone()))
            return result
        self.ref.sample = wrapped
        return self

    def __exit__(self, *exc):
        self.ref.sample = self.original


def reference_loop(ref, drafter, target, prompt, max_new):
    """Runs z-lab's dflash_generate unchanged and reconstructs per-step drafts from its sample calls."""
    with RecordingSampler(ref) as rec:
        res = ref.dflash_generate(drafter, target, torch.tensor([prompt]), max_new, None, 0.0,
                                  return_stats=False)
    generated = res[0, len(prompt):].tolist()
    # calls: prefill posterior (len 1), then per step: draft (B-1), posterior (B)
    drafts_per_step = [c[1][0].tolist() for c in rec.calls[1:] if c[1].shape[1] == BLOCK - 1]
    return generated, drafts_per_step


def harness_loop(ref, drafter, target, prompt, max_new, hybrid):
    """Same algorithm as dflash_generate; rollback by restore-and-replay so it works for hybrids.
    Block size and mask id come from the drafter, the device from the target (also used by
    tools/train/check_zlab.py --tau for the demo pair on the GPU)."""
    from transformers import DynamicCache
    BLOCK = drafter.block_size
    dev = next(target.parameters()).device
    n_in = len(prompt)
    max_len = n_in + max_new
    out_ids = torch.full((1, max_len + BLOCK), drafter.mask_token_id, dtype=torch.long, device=dev)
    pos_ids = torch.arange(out_ids.shape[1], device=dev).unsqueeze(0)
    draft_cache = DynamicCache()
    out = target(torch.tensor([prompt], device=dev), position_ids=pos_ids[:, :n_in], use_cache=True,
                 output_hidden_states=True)
    cache = out.past_key_values
    out_ids[0, :n_in] = torch.tensor(prompt, device=dev)
    out_ids[0, n_in] = out.logits[0, -1].argmax()
    ctx = ref.extract_context_feature(out.hidden_states, drafter.target_layer_ids)
    start = n_in
    steps, golden = [], {}
    while start < max_len:
        block = out_ids[:, start:start + BLOCK].clone()
        noise = target.get_input_embeddings()(block)
        dh = drafter(target_hidden=ctx, noise_embedding=noise,
                     position_ids=pos_ids[:, draft_cache.get_seq_length():start + BLOCK],
                     past_key_values=draft_cache, use_cache=True, is_causal=False)
        draft_logits = target.get_output_embeddings()(dh[:, 1 - BLOCK:, :])
        draft_cache.crop(start)
        block[:, 1:] = draft_logits.argmax(-1)
        snapshot = copy.deepcopy(cache) if hybrid else None
        vout = target(block, position_ids=pos_ids[:, start:start + BLOCK], past_key_values=cache,
                      use_cache=True, output_hidden_states=True)
        post = vout.logits.argmax(-1)
        a = int((block[:, 1:] == post[:, :-1]).cumprod(dim=1).sum(dim=1)[0])
        if len(steps) < 2:
            golden[f"step{len(steps)}.draft_logits"] = draft_logits[0].float().contiguous()
            golden[f"step{len(steps)}.verify_logits"] = vout.logits[0].float().contiguous()
        emitted = block[0, 1:a + 1].tolist() + [int(post[0, a])]
        steps.append({"pos": start, "drafts": block[0, 1:].tolist(), "accepted": a, "emitted": emitted})
        out_ids[:, start:start + a + 1] = block[:, :a + 1]
        out_ids[0, start + a + 1] = post[0, a]
        if hybrid:
            cache = snapshot
            target(block[:, :a + 1], position_ids=pos_ids[:, start:start + a + 1], past_key_values=cache,
                   use_cache=True)
        else:
            cache.crop(start + a + 1)
        start += a + 1
        ctx = ref.extract_context_feature(vout.hidden_states, drafter.target_layer_ids)[:, :a + 1, :]
    generated = out_ids[0, n_in:min(start + 1, max_len)].tolist()
    return generated, steps, golden


def load_pair(ref, d):
    """The pair as any loader of the saved files sees it: weights upcast to f32, and the rotary
    inv_freq buffers computed afresh in f32. (Running the in-memory models after
    `.to(torch.bfloat16)` + `.float()` would use bf16-rounded inv_freq, since that non-persistent
    buffer is converted too — a ~1e-3 logit difference from what the saved checkpoints mean.)"""
    from transformers import AutoModelForCausalLM
    target = AutoModelForCausalLM.from_pretrained(os.path.join(d, "target"), dtype=torch.float32).eval()
    drafter = ref.DFlashDraftModel.from_pretrained(os.path.join(d, "draft"), dtype=torch.float32).eval()
    return target, drafter


def save_pair(out_dir, name, target, drafter, prompt, max_new, hybrid, ref):
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    target.to(torch.bfloat16).save_pretrained(os.path.join(d, "target"), safe_serialization=True)
    drafter.to(torch.bfloat16).save_pretrained(os.path.join(d, "draft"), safe_serialization=True)
    write_traces(ref, d, name, prompt, max_new, hybrid)


def write_traces(ref, d, name, prompt, max_new, hybrid):
    """trace.json and golden.safetensors of the pair saved in `d`, run from the saved files."""
    from safetensors.torch import save_file
    target, drafter = load_pair(ref, d)
    with torch.no_grad():
        generated, steps, golden = harness_loop(ref, drafter, target, prompt, max_new, hybrid)
        plain = greedy(target, prompt, max_new)
        record = {"name": name, "hybrid": hybrid, "block_size": BLOCK, "mask_token_id": MASK_ID,
                  "prompt_ids": prompt, "max_new_tokens": max_new, "generated_ids": generated,
                  "greedy_ids": plain, "steps": steps,
                  "tau": sum(s["accepted"] + 1 for s in steps) / len(steps),
                  "rope_inv_freq": "f32"}  # run from the saved files (see load_pair)
        if not hybrid:
            ref_generated, ref_drafts = reference_loop(ref, drafter, target, prompt, max_new)
            assert ref_generated == generated, (name, ref_generated, generated)
            assert ref_drafts == [s["drafts"] for s in steps], name
            record["checked_against_dflash_generate"] = True
    with open(os.path.join(d, "trace.json"), "w") as f:
        json.dump(record, f, indent=1)
    save_file(golden, os.path.join(d, "golden.safetensors"))
    acc = [s["accepted"] for s in steps]
    print(f"{name}: steps {len(steps)} tau {record['tau']:.2f} accepted {acc}; "
          f"speculative == greedy: {generated == plain[:len(generated)]}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--ref", default=os.environ.get("DFLASH_REF", ".ref/dflash_ref") + "/model.py")
    ap.add_argument("--train-steps", type=int, default=2000, help="drafter training steps")
    ap.add_argument("--target-steps", type=int, default=4000, help="target training steps")
    ap.add_argument("--regen-traces", action="store_true",
                    help="keep the checkpoints under --out; only rerun trace.json and golden.safetensors")
    args = ap.parse_args()
    torch.set_grad_enabled(True)
    ref = load_reference(args.ref)
    if args.regen_traces:
        for name in ("dense-random", "dense-trained", "hybrid-trained"):
            with open(os.path.join(args.out, name, "trace.json")) as f:
                old = json.load(f)
            write_traces(ref, os.path.join(args.out, name), name, old["prompt_ids"], old["max_new_tokens"],
                         old["hybrid"])
        return
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator().manual_seed(7)
    random_prompt = torch.randint(0, MASK_ID - 1, (12,), generator=gen).tolist()
    synth_prompt = synthetic_batch(1, 10, gen)[0].tolist()

    dense_ids = [1, 3, 4]
    dense = make_dense_target(100)
    save_pair(args.out, "dense-random", dense, make_drafter(ref, 6, dense_ids, 200), random_prompt, 48, False,
              ref)
    dense = train_target(make_dense_target(110), args.target_steps, 111, device)
    trained = train_drafter(ref, make_drafter(ref, 6, dense_ids, 300), dense, args.train_steps, 301, device)
    save_pair(args.out, "dense-trained", dense, trained, synth_prompt, 64, False, ref)

    hybrid_ids = [0, 2]
    hybrid = train_target(make_hybrid_target(400), args.target_steps, 401, device)
    trained_h = train_drafter(ref, make_drafter(ref, 4, hybrid_ids, 500), hybrid, args.train_steps, 501, device)
    save_pair(args.out, "hybrid-trained", hybrid, trained_h, synth_prompt, 64, True, ref)


if __name__ == "__main__":
    main()
