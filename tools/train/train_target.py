#!/usr/bin/env python3
"""Stage 3: the target, a Qwen3.5 hybrid (transformers' own Qwen3_5ForCausalLM / Qwen3_5TextConfig).

Layers follow the Qwen3.5 schedule (Gated DeltaNet, GDN, x3 then one gated full-attention layer); the attention
layers use partial RoPE (factor 0.25, theta 1e7). The vocabulary is the tokenizer's, padded to a multiple of 64.
Training: random windows of the packed train stream, bf16 autocast over fp32 weights, AdamW, linear warm-up then
cosine decay, gradient clipping; step- and time-budgeted (with --steps 0 the step count is fitted to
--max-minutes from the measured speed of the first steps; it is logged, and passing it back as --steps
reproduces the run). Logs train / validation loss to a JSONL file; saves with save_pretrained in bf16 in shards
of at most 15 MB, plus generation_config.json and the tokenizer files; reloads the saved files and logs their
validation loss (the number a rerun must reproduce).

Usage: python3 tools/train/train_target.py --data work/data --tokenizer work/tokenizer --out work/target
       python3 tools/train/train_target.py --bench 64x512,128x256   (speed of this config on random tokens)
"""
import argparse
import json
import math
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import EOT, IM_END, Logger, autocast, read_json, round_up, seed_everything, write_json  # noqa: E402


def add_model_args(ap):
    g = ap.add_argument_group("model")
    g.add_argument("--hidden", type=int, default=512)
    g.add_argument("--layers", type=int, default=8, help="a multiple of 4: GDN x3 + attention, repeated")
    g.add_argument("--intermediate", type=int, default=896)
    g.add_argument("--heads", type=int, default=4)
    g.add_argument("--kv-heads", type=int, default=2)
    g.add_argument("--head-dim", type=int, default=128)
    g.add_argument("--linear-key-heads", type=int, default=4)
    g.add_argument("--linear-value-heads", type=int, default=8)
    g.add_argument("--linear-key-dim", type=int, default=64)
    g.add_argument("--linear-value-dim", type=int, default=64)
    g.add_argument("--rope-theta", type=float, default=1e7)
    g.add_argument("--max-positions", type=int, default=8192)
    g.add_argument("--untied", action="store_true", help="separate lm_head (default: tied to the embedding)")


def make_config(args, vocab_size, eos_ids, pad_id):
    from transformers import Qwen3_5TextConfig
    layer_types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(args.layers)]
    return Qwen3_5TextConfig(
        vocab_size=vocab_size, hidden_size=args.hidden, intermediate_size=args.intermediate,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        head_dim=args.head_dim, layer_types=layer_types, linear_conv_kernel_dim=4,
        linear_key_head_dim=args.linear_key_dim, linear_value_head_dim=args.linear_value_dim,
        linear_num_key_heads=args.linear_key_heads, linear_num_value_heads=args.linear_value_heads,
        max_position_embeddings=args.max_positions, rms_norm_eps=1e-6, tie_word_embeddings=not args.untied,
        initializer_range=0.02, hidden_act="silu", attention_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": args.rope_theta, "partial_rotary_factor": 0.25},
        bos_token_id=None, eos_token_id=eos_ids, pad_token_id=pad_id)


def build_model(cfg, device):
    import torch
    from transformers import Qwen3_5ForCausalLM
    model = Qwen3_5ForCausalLM(cfg).to(device=device, dtype=torch.float32)
    return model


def count_params(model):
    seen, n = set(), 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            n += p.numel()
    return n


def lr_at(step, total, warmup, lr, min_frac):
    if step < warmup:
        return lr * (step + 1) / warmup
    if total <= warmup:
        return lr
    t = min(1.0, (step - warmup) / max(1, total - warmup))
    return lr * (min_frac + (1 - min_frac) * 0.5 * (1 + math.cos(math.pi * t)))


def make_optimizer(model, lr, wd):
    import torch
    decay, no_decay, seen = [], [], set()
    for name, p in model.named_parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        (decay if p.ndim >= 2 and "embed" not in name else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    except (TypeError, RuntimeError):
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)


def lm_loss(model, x):
    """Mean next-token cross-entropy of a [B, T+1] window batch."""
    import torch.nn.functional as F
    out = model(input_ids=x[:, :-1], use_cache=False)
    logits = out.logits
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))


def sample_windows(stream, n, length, gen, device):
    import torch
    starts = torch.randint(0, stream.numel() - length - 1, (n,), generator=gen)
    idx = starts[:, None] + torch.arange(length + 1)[None, :]
    return stream[idx.to(stream.device)].to(device=device, dtype=torch.long)


def evaluate(model, batches, amp=True):
    import torch
    model.eval()
    tot = 0.0
    with torch.no_grad(), autocast(amp):
        for x in batches:
            tot += lm_loss(model, x).item()
    model.train()
    return tot / max(1, len(batches))


def bench(args):
    import torch
    device = "cuda"
    cfg = make_config(args, round_up(args.vocab, 64), [0], 0)
    model = build_model(cfg, device).train()
    opt = make_optimizer(model, 1e-4, 0.1)
    results = []
    for spec in args.bench.split(","):
        b, t = (int(v) for v in spec.lower().split("x"))
        gen = torch.Generator().manual_seed(0)
        x = torch.randint(0, cfg.vocab_size, (b, t + 1), generator=gen).to(device)
        torch.cuda.reset_peak_memory_stats()
        times = []
        for i in range(args.bench_steps):
            torch.cuda.synchronize()
            t0 = time.time()
            with autocast(True):
                loss = lm_loss(model, x)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            times.append(time.time() - t0)
        step = sorted(times[2:])[len(times[2:]) // 2] if len(times) > 3 else times[-1]
        rec = {"batch": b, "seq": t, "step_s": round(step, 4), "tokens_per_s": round(b * t / step),
               "peak_gb": round(torch.cuda.max_memory_allocated() / 2**30, 2), "params": count_params(model)}
        results.append(rec)
        print("bench", json.dumps(rec), flush=True)
    if args.bench_out:
        write_json(args.bench_out, {"config": cfg.to_dict(), "results": results})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="folder written by tokenizer.py (train.bin, val.bin, meta.json)")
    ap.add_argument("--tokenizer", help="folder with tokenizer.json and tokenizer_config.json")
    ap.add_argument("--out", help="checkpoint folder")
    ap.add_argument("--log", help="JSONL log (default OUT/train_log.jsonl)")
    add_model_args(ap)
    g = ap.add_argument_group("training")
    g.add_argument("--seq-len", type=int, default=512)
    g.add_argument("--batch", type=int, default=64)
    g.add_argument("--lr", type=float, default=2e-3)
    g.add_argument("--min-lr-frac", type=float, default=0.1)
    g.add_argument("--warmup-steps", type=int, default=100)
    g.add_argument("--weight-decay", type=float, default=0.1)
    g.add_argument("--clip", type=float, default=1.0)
    g.add_argument("--steps", type=int, default=0, help="0: fit the step count to --max-minutes")
    g.add_argument("--max-minutes", type=float, default=9.0, help="wall-clock budget of the whole stage")
    g.add_argument("--reserve-minutes", type=float, default=0.75, help="kept free for the final eval and saving")
    g.add_argument("--eval-every", type=int, default=200)
    g.add_argument("--eval-batches", type=int, default=16)
    g.add_argument("--log-every", type=int, default=20)
    g.add_argument("--seed", type=int, default=1234)
    g.add_argument("--bench", help="BxT[,BxT...]: time training steps of this config on random tokens, exit")
    g.add_argument("--bench-steps", type=int, default=8)
    g.add_argument("--bench-out")
    g.add_argument("--vocab", type=int, default=8192, help="vocabulary for --bench")
    args = ap.parse_args()

    import numpy as np
    import torch
    if args.bench:
        return bench(args)
    if not (args.data and args.tokenizer and args.out):
        ap.error("--data, --tokenizer and --out are required")
    t_start = time.time()
    budget_s = args.max_minutes * 60
    seed_everything(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    device = "cuda" if torch.cuda.is_available() else "cpu"
    amp = device == "cuda"

    meta = read_json(os.path.join(args.data, "meta.json"))
    ids = meta["special_ids"]
    vocab_size = round_up(meta["vocab_size"], 64)
    eos_ids = [ids[IM_END], ids[EOT]]
    cfg = make_config(args, vocab_size, eos_ids, ids[EOT])
    model = build_model(cfg, device).train()
    n_params = count_params(model)
    log = Logger(args.log or os.path.join(args.out, "train_log.jsonl"))
    log.log(event="config", params=n_params, vocab=vocab_size, real_vocab=meta["vocab_size"],
            layer_types=cfg.layer_types, args=vars(args))

    train_stream = torch.from_numpy(np.fromfile(os.path.join(args.data, "train.bin"), dtype=np.uint16)
                                    .astype(np.int32)).to(device)
    val_stream = torch.from_numpy(np.fromfile(os.path.join(args.data, "val.bin"), dtype=np.uint16)
                                  .astype(np.int32)).to(device)
    bytes_per_token = meta["splits"]["val"]["bytes_per_token"]
    gen = torch.Generator().manual_seed(args.seed)
    val_gen = torch.Generator().manual_seed(args.seed + 1)
    val_len = min(args.seq_len, val_stream.numel() // 2 - 2)
    val_batches = [sample_windows(val_stream, args.batch, val_len, val_gen, device)
                   for _ in range(args.eval_batches)]
    opt = make_optimizer(model, args.lr, args.weight_decay)

    total = args.steps if args.steps > 0 else 10**9
    calib_from, calib_to = 5, min(args.warmup_steps, 25)
    step, t_calib, tokens = 0, None, 0
    run_loss, run_n = 0.0, 0
    t_log = time.time()
    val_loss = evaluate(model, val_batches, amp)
    log.log(event="eval", step=0, val_loss=val_loss)
    while step < total:
        elapsed = time.time() - t_start
        if elapsed > budget_s - args.reserve_minutes * 60:
            log.log(event="time_budget_reached", step=step, elapsed=round(elapsed, 1))
            break
        lr = lr_at(step, total, args.warmup_steps, args.lr, args.min_lr_frac)
        for group in opt.param_groups:
            group["lr"] = lr
        x = sample_windows(train_stream, args.batch, args.seq_len, gen, device)
        with autocast(amp):
            loss = lm_loss(model, x)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        tokens += x.shape[0] * (x.shape[1] - 1)
        run_loss += loss.detach()
        run_n += 1
        if step == calib_from:
            t_calib = time.time()
        if args.steps <= 0 and step == calib_to:
            per_step = (time.time() - t_calib) / (calib_to - calib_from)
            # an eval costs about eval_batches forward passes: ~1/3 of a training step each
            per_step_eff = per_step * (1 + args.eval_batches / 3 / args.eval_every)
            remaining = budget_s - args.reserve_minutes * 60 - (time.time() - t_start)
            total = step + max(1, int(0.93 * remaining / per_step_eff))   # 7% slack: other load, drift
            log.log(event="fitted_steps", steps=total, step_s=round(per_step, 4),
                    note="pass --steps %d to reproduce this schedule" % total)
        if step % args.log_every == 0 or step == total:
            dt = time.time() - t_log
            log.log(event="train", step=step, loss=float(run_loss) / run_n, lr=lr, grad_norm=float(gnorm),
                    tokens=tokens, tok_per_s=round(run_n * x.shape[0] * (x.shape[1] - 1) / dt))
            run_loss, run_n, t_log = 0.0, 0, time.time()
        if step % args.eval_every == 0 and step != total:
            val_loss = evaluate(model, val_batches, amp)
            log.log(event="eval", step=step, val_loss=val_loss, val_bpb=val_loss / math.log(2) / bytes_per_token)
    val_loss = evaluate(model, val_batches, amp)
    train_minutes = (time.time() - t_start) / 60
    log.log(event="eval", step=step, val_loss=val_loss, val_bpb=val_loss / math.log(2) / bytes_per_token,
            final=True)

    # Save: bf16, shards of at most 15 MB, generation config, tokenizer files.
    from transformers import GenerationConfig, Qwen3_5ForCausalLM
    os.makedirs(args.out, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(args.out, max_shard_size="15MB", safe_serialization=True)
    GenerationConfig(eos_token_id=eos_ids, pad_token_id=ids[EOT], bos_token_id=None, do_sample=True,
                     temperature=0.7, top_p=0.95).save_pretrained(args.out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(args.tokenizer, name), os.path.join(args.out, name))
    del model, opt
    torch.cuda.empty_cache()
    reloaded = Qwen3_5ForCausalLM.from_pretrained(args.out, dtype=torch.float32).to(device)
    saved_val_fp32 = evaluate(reloaded, val_batches, amp=False)
    saved_val_bf16 = evaluate(reloaded, val_batches, amp=True)
    shards = sorted(f for f in os.listdir(args.out) if f.endswith(".safetensors"))
    sizes = {f: os.path.getsize(os.path.join(args.out, f)) for f in shards}
    summary = {"params": n_params, "vocab_size": vocab_size, "steps": step, "tokens": tokens,
               "seq_len": args.seq_len, "batch": args.batch, "final_val_loss": val_loss,
               "saved_val_loss_fp32": saved_val_fp32, "saved_val_loss_bf16_autocast": saved_val_bf16,
               "val_bpb": saved_val_fp32 / math.log(2) / bytes_per_token, "bytes_per_token": bytes_per_token,
               "train_minutes": round(train_minutes, 2), "total_minutes": round((time.time() - t_start) / 60, 2),
               "shards": sizes, "max_shard_mb": round(max(sizes.values()) / 1e6, 2),
               "total_mb": round(sum(sizes.values()) / 1e6, 2), "seed": args.seed}
    write_json(os.path.join(args.out, "training_summary.json"), summary)
    log.log(event="saved", **{k: v for k, v in summary.items() if k != "shards"})
    log.close()


if __name__ == "__main__":
    main()
