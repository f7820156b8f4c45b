#!/usr/bin/env python3
"""Stage 4: the DFlash drafter (dflash_model.py), trained against the frozen target (docs/DFLASH.md §9).

1. Target alignment: prompts cut from TRAIN files (a file start or a random offset; lengths --prompt-lens) are
   continued by the trained target itself for --gen-len tokens (a --greedy-frac share greedily, the rest sampled
   at --gen-temp). Validation sequences: greedy continuations of prompts from VALIDATION files.
2. Context features: one target forward per sequence; the outputs of layers target_layer_ids (z-lab default rule
   for the target's depth, docs/DFLASH.md §1.3), concatenated, kept in bf16 on the GPU.
3. Training: per sequence --anchors random anchors a among the generated positions with a and a+1 generated;
   each anchor is a block [x_a, mask x 15] at positions a..a+15; all blocks of a sequence run in one packed
   forward whose mask lets block n see context rows < a_n and its own block only; loss = cross-entropy of
   slot k against x_{a+k}, weight exp(-(k-1)/7) for k = 1..15, slot 0 weight 0, normalised by the weights.
   Target embedding and lm_head are used frozen. AdamW, warm-up + cosine, grad clip; step- and time-budgeted.
4. Saves the drafter in the z-lab format (config.json + model.safetensors, bf16) and a summary.

Validation metrics, on GREEDY continuations of validation prompts, at every anchor: the weighted loss, per-slot
accuracy, tau_tf = 1 + mean number of leading correct slots (uniform over positions: optimistic), and tau_walk =
tokens / steps of the T=0 loop replayed along each sequence (s <- s + streak(s) + 1). For a greedy continuation a
draft is accepted at T=0 exactly when it equals the label, so tau_walk is the teacher-forced estimate of the T=0
tau that eval_tau.py measures.

Usage: python3 tools/train/train_drafter.py --target work/target --data work/data --out work/drafter
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (MASK, EOT, Logger, autocast, build_target_layer_ids, default_num_taps, loss_weights,  # noqa: E402
                    seed_everything, write_json)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--log")
    g = ap.add_argument_group("drafter")
    g.add_argument("--layers", type=int, default=2)
    g.add_argument("--intermediate", type=int, default=768)
    g.add_argument("--heads", type=int, default=0, help="0: the target's attention heads")
    g.add_argument("--kv-heads", type=int, default=0, help="0: the target's")
    g.add_argument("--head-dim", type=int, default=0, help="0: the target's")
    g.add_argument("--num-taps", type=int, default=0, help="0: 5 for deep targets, 3 for 6..19 layers, else 1")
    g.add_argument("--block-size", type=int, default=16)
    g.add_argument("--lam", type=float, default=7.0, help="loss decay: w_k = exp(-(k-1)/lam)")
    g = ap.add_argument_group("target-aligned data")
    g.add_argument("--prompt-lens", default="32,64,128")
    g.add_argument("--gen-len", type=int, default=256)
    g.add_argument("--num-seqs", type=int, default=0, help="0: as many as --gen-minutes allows")
    g.add_argument("--max-seqs", type=int, default=40000)
    g.add_argument("--gen-batch", type=int, default=512)
    g.add_argument("--greedy-frac", type=float, default=0.5)
    g.add_argument("--gen-temp", type=float, default=0.8)
    g.add_argument("--gen-minutes", type=float, default=3.0)
    g.add_argument("--val-seqs", type=int, default=64)
    g.add_argument("--feature-gb", type=float, default=60.0, help="cap on the cached features (GPU memory)")
    g = ap.add_argument_group("training")
    g.add_argument("--batch", type=int, default=32, help="sequences per step")
    g.add_argument("--anchors", type=int, default=48, help="anchors per sequence")
    g.add_argument("--lr", type=float, default=6e-4)
    g.add_argument("--min-lr-frac", type=float, default=0.05)
    g.add_argument("--warmup-steps", type=int, default=60)
    g.add_argument("--weight-decay", type=float, default=0.01)
    g.add_argument("--clip", type=float, default=1.0)
    g.add_argument("--steps", type=int, default=0, help="0: fit to --max-minutes")
    g.add_argument("--max-minutes", type=float, default=9.0, help="wall-clock budget of the whole stage")
    g.add_argument("--reserve-minutes", type=float, default=0.4)
    g.add_argument("--eval-every", type=int, default=200)
    g.add_argument("--log-every", type=int, default=20)
    g.add_argument("--seed", type=int, default=4321)
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F
    import dflash_model as dm
    import targetlib as tl
    from train_target import lr_at, make_optimizer

    t_start = time.time()
    budget_s = args.max_minutes * 60
    seed_everything(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    device = "cuda" if torch.cuda.is_available() else "cpu"
    amp = device == "cuda"
    log = Logger(args.log or os.path.join(args.out, "train_log.jsonl"))

    target = tl.load_target(args.target, device)
    tc = target.config
    ids, real_vocab = tl.special_ids(args.target)
    mask_id = ids[MASK]
    n_taps = args.num_taps or default_num_taps(tc.num_hidden_layers)
    layer_ids = build_target_layer_ids(tc.num_hidden_layers, n_taps)
    theta = float((getattr(tc, "rope_parameters", None) or {}).get("rope_theta", 1e7))
    cfg = dm.drafter_config(
        hidden=tc.hidden_size, intermediate=args.intermediate, layers=args.layers,
        heads=args.heads or tc.num_attention_heads, kv_heads=args.kv_heads or tc.num_key_value_heads,
        head_dim=args.head_dim or tc.head_dim, vocab_size=tc.vocab_size, mask_token_id=mask_id,
        target_layer_ids=layer_ids, num_target_layers=tc.num_hidden_layers, block_size=args.block_size,
        rope_theta=theta, max_positions=tc.max_position_embeddings, rms_norm_eps=tc.rms_norm_eps)
    torch.manual_seed(args.seed)
    drafter = dm.DFlashDrafter(cfg).to(device).float().train()
    n_params = sum(p.numel() for p in drafter.parameters())
    log.log(event="config", drafter_params=n_params, target_layer_ids=layer_ids, mask_token_id=mask_id,
            real_vocab=real_vocab, args=vars(args))

    embed = target.get_input_embeddings()
    lm_head = target.get_output_embeddings()
    gen_dev = torch.Generator(device=device).manual_seed(args.seed)

    # ---- 1+2. target-aligned sequences and their features -------------------------------------------------
    tr_stream, tr_docs = tl.load_split(args.data, "train")
    va_stream, va_docs = tl.load_split(args.data, "val")
    x = torch.tensor(tr_stream[:64].astype("int64"), device=device)[None]
    tap_err = tl.check_tap_convention(target, x, layer_ids)
    log.log(event="tap_check", max_abs_diff=tap_err, note="hidden_states[l+1] vs hook on layer l output")
    assert tap_err < 1e-5, tap_err

    prompt_lens = [int(v) for v in args.prompt_lens.split(",")]
    s_max = max(prompt_lens) + args.gen_len
    feat_dim = len(layer_ids) * tc.hidden_size
    per_seq_bytes = s_max * feat_dim * 2
    cap = min(args.max_seqs, int(args.feature_gb * 2**30 / per_seq_bytes))
    want = min(args.num_seqs, cap) if args.num_seqs else cap
    def gen_batch(prompts_np, temps):
        p = torch.tensor(prompts_np, device=device)
        seqs = tl.generate(target, p, args.gen_len, temps, gen_dev, real_vocab, [mask_id])
        with torch.no_grad():
            out = target(input_ids=seqs, output_hidden_states=True, use_cache=False, **tl.keep_last(target))
            feats = tl.tapped(out.hidden_states, layer_ids).to(torch.bfloat16)
        pad = s_max - seqs.shape[1]
        if pad:
            seqs = F.pad(seqs, (0, pad), value=ids[EOT])
            feats = F.pad(feats, (0, 0, 0, pad))
        return seqs, p.shape[1], feats

    t_gen = time.time()
    vp_len = prompt_lens[len(prompt_lens) // 2]
    vp, _ = tl.sample_prompts(va_stream, va_docs, args.val_seqs, vp_len, args.seed + 7, distinct=True)
    val_seqs, vstart, val_feats = gen_batch(vp, torch.zeros(args.val_seqs, device=device))
    val_starts = torch.full((val_seqs.shape[0],), vstart, device=device, dtype=torch.long)

    # Preallocated (no concatenation copies): as many sequences as the time allows, at most `want`.
    seqs_all = torch.empty((want, s_max), dtype=torch.long, device=device)
    starts_all = torch.empty((want,), dtype=torch.long, device=device)
    feats_all = torch.empty((want, s_max, feat_dim), dtype=torch.bfloat16, device=device)
    n_done, bi = 0, 0
    gen_deadline = t_start + args.gen_minutes * 60
    while n_done < want:
        if n_done and time.time() > gen_deadline:
            break
        n = min(args.gen_batch, want - n_done)
        plen = prompt_lens[bi % len(prompt_lens)]
        prompts, _ = tl.sample_prompts(tr_stream, tr_docs, n, plen, args.seed * 1000 + bi)
        rt = torch.rand(n, generator=torch.Generator().manual_seed(args.seed + 100 + bi))
        temps = torch.where(rt < args.greedy_frac, torch.zeros(n), torch.full((n,), args.gen_temp)).to(device)
        seqs, st, feats = gen_batch(prompts, temps)
        seqs_all[n_done:n_done + n] = seqs
        starts_all[n_done:n_done + n] = st
        feats_all[n_done:n_done + n] = feats
        del seqs, feats
        n_done += n
        bi += 1
        log.log(event="generate", batch=bi, seqs=n_done, prompt_len=plen,
                gen_tok_per_s=round(n_done * args.gen_len / (time.time() - t_gen)))
    seqs_all, starts_all, feats_all = seqs_all[:n_done], starts_all[:n_done], feats_all[:n_done]
    gen_s = time.time() - t_gen
    log.log(event="data", seqs=int(seqs_all.shape[0]), gen_tokens=int(seqs_all.shape[0]) * args.gen_len,
            seconds=round(gen_s, 1), feature_gb=round(feats_all.numel() * 2 / 2**30, 2),
            sample_greedy_val=tl.decode_ids(args.target, val_seqs[0, :vstart + 64].tolist()))
    if device == "cuda":
        torch.cuda.empty_cache()

    # ---- 3. training ---------------------------------------------------------------------------------------
    bs = args.block_size
    w_full = torch.tensor(loss_weights(bs, args.lam), device=device)
    opt = make_optimizer(drafter, args.lr, args.weight_decay)
    gen_cpu = torch.Generator().manual_seed(args.seed + 1)
    n_anchor = min(args.anchors, args.gen_len - 1)

    def make_batch(seqs, starts, feats, rows, gen_a, all_anchors=False):
        """Random anchors (n_anchor per sequence), or every anchor position (validation)."""
        b = rows.numel()
        tok = seqs[rows]
        st, ln = starts[rows], starts[rows] + args.gen_len
        if all_anchors:      # validation: the same start for every row (greedy val prompts of one length)
            anchors = (st[:, None] + torch.arange(args.gen_len - 1, device=device)[None, :])
        else:
            pos = torch.arange(s_max, device=device)[None, :]
            ok = (pos >= st[:, None]) & (pos <= ln[:, None] - 2)            # a and a+1 generated
            r = torch.rand(b, s_max, generator=gen_a).to(device)
            r = torch.where(ok, r, torch.full_like(r, -1.0))
            anchors = r.topk(n_anchor, dim=1).indices.sort(dim=1).values     # [b, N]
        n = anchors.shape[1]
        p = anchors[:, :, None] + torch.arange(bs, device=device)           # [b, N, B]
        valid = p < ln[:, None, None]
        labels = tok.gather(1, p.clamp_max(s_max - 1).reshape(b, -1)).view(b, n, bs)
        block = labels.clone()
        block[:, :, 1:] = mask_id
        return feats[rows], block, anchors, labels, valid

    def run(feats, block, anchors, labels, valid):
        b, n = anchors.shape
        with autocast(amp):
            noise = embed(block.view(b, -1))
            hid = drafter.forward_train(feats, noise, anchors).view(b, n, bs, -1)[:, :, 1:]
            logits = lm_head(hid)
        logits = logits.float()
        lab = labels[:, :, 1:]
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), lab.reshape(-1),
                             reduction="none").view_as(lab)
        w = w_full[1:] * valid[:, :, 1:]
        loss = (ce * w).sum() / w.sum()
        with torch.no_grad():
            correct = (logits[..., :real_vocab].argmax(-1) == lab) & valid[:, :, 1:]
            streak = correct.long().cumprod(dim=-1).sum(-1)                  # leading correct slots
        return loss, correct, valid[:, :, 1:], streak

    def walk(streak):
        """Steps and tokens of the T=0 speculative loop along one greedy continuation, given the number of
        leading correct drafts at every anchor (= pending-token position): s <- s + streak[s] + 1."""
        st = streak.tolist()
        i, steps = 0, 0
        while i < len(st):
            i += st[i] + 1
            steps += 1
        return steps, len(st)

    @torch.no_grad()
    def validate():
        """Every anchor of every greedy validation continuation: weighted loss, per-slot accuracy, tau_tf (mean
        of 1 + leading correct slots over all anchors) and tau_walk (the T=0 loop replayed along the sequence:
        tokens / steps; what eval_tau.py measures, up to the tail and numerics)."""
        drafter.eval()
        chunk = max(1, args.batch * n_anchor // (args.gen_len - 1))
        tot_loss, tot_n, acc_num, acc_den, streaks, w_steps, w_tokens = 0.0, 0, 0, 0, [], 0, 0
        for i in range(0, val_seqs.shape[0], chunk):
            rows = torch.arange(i, min(i + chunk, val_seqs.shape[0]), device=device)
            loss, correct, valid, streak = run(*make_batch(val_seqs, val_starts, val_feats, rows, None, True))
            tot_loss += loss.item() * rows.numel()
            tot_n += rows.numel()
            acc_num = acc_num + correct.sum(dim=(0, 1))
            acc_den = acc_den + valid.sum(dim=(0, 1))
            full = valid.all(-1)
            streaks.append(streak[full].float())
            for r in range(streak.shape[0]):
                s_, t_ = walk(streak[r])
                w_steps += s_
                w_tokens += t_
        drafter.train()
        acc = (acc_num.float() / acc_den.clamp_min(1)).tolist()
        return (tot_loss / tot_n, [round(a, 4) for a in acc], 1.0 + torch.cat(streaks).mean().item(),
                w_tokens / max(1, w_steps))

    total = args.steps if args.steps > 0 else 10**9
    calib_from, calib_to = 5, min(args.warmup_steps, 25)
    step, t_calib, run_loss, run_n, t_log = 0, None, 0.0, 0, time.time()
    vl, vacc, vtau, vwalk = validate()
    log.log(event="eval", step=0, val_loss=vl, tau_walk=vwalk, tau_tf=vtau, slot_acc=vacc)
    n_seqs = seqs_all.shape[0]
    while step < total:
        if time.time() - t_start > budget_s - args.reserve_minutes * 60:
            log.log(event="time_budget_reached", step=step)
            break
        lr = lr_at(step, total, args.warmup_steps, args.lr, args.min_lr_frac)
        for group in opt.param_groups:
            group["lr"] = lr
        rows = torch.randint(0, n_seqs, (args.batch,), generator=gen_cpu).to(device)
        loss, correct, valid, streak = run(*make_batch(seqs_all, starts_all, feats_all, rows, gen_cpu))
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(drafter.parameters(), args.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        run_loss += loss.detach()
        run_n += 1
        if step == calib_from:
            t_calib = time.time()
        if args.steps <= 0 and step == calib_to:
            per_step = (time.time() - t_calib) / (calib_to - calib_from)
            remaining = budget_s - args.reserve_minutes * 60 - (time.time() - t_start)
            n_evals = 1 + remaining / per_step / args.eval_every
            # a validation pass covers every anchor of val_seqs sequences (forward only: ~1/2 of a step's cost)
            remaining -= n_evals * per_step * 0.5 * args.val_seqs * (args.gen_len - 1) / (args.batch * n_anchor)
            total = step + max(1, int(0.93 * remaining / per_step))
            log.log(event="fitted_steps", steps=total, step_s=round(per_step, 4),
                    note="pass --steps %d to reproduce this schedule" % total)
        if step % args.log_every == 0 or step == total:
            dt = time.time() - t_log
            log.log(event="train", step=step, loss=float(run_loss) / run_n, lr=lr, grad_norm=float(gnorm),
                    tau_tf_batch=1.0 + streak.float().mean().item(), steps_per_s=round(run_n / dt, 2))
            run_loss, run_n, t_log = 0.0, 0, time.time()
        if step % args.eval_every == 0 and step != total:
            vl, vacc, vtau, vwalk = validate()
            log.log(event="eval", step=step, val_loss=vl, tau_walk=vwalk, tau_tf=vtau, slot_acc=vacc)
    vl, vacc, vtau, vwalk = validate()
    log.log(event="eval", step=step, val_loss=vl, tau_walk=vwalk, tau_tf=vtau, slot_acc=vacc, final=True)

    # ---- 4. save ---------------------------------------------------------------------------------------------
    names = dm.save_drafter(drafter, args.out)
    assert names == dm.expected_tensor_names(args.layers), names
    reloaded = dm.load_drafter(args.out, device)
    drafter = reloaded.train()        # validate the saved (bf16-rounded) weights
    svl, sacc, stau, swalk = validate()
    size = os.path.getsize(os.path.join(args.out, "model.safetensors"))
    summary = {"drafter_params": n_params, "target_layer_ids": layer_ids, "mask_token_id": mask_id,
               "steps": step, "seqs": int(n_seqs), "gen_seconds": round(gen_s, 1),
               "final_val_loss": vl, "final_tau_walk": vwalk, "final_tau_tf": vtau, "saved_val_loss": svl,
               "saved_tau_walk": swalk, "saved_tau_tf": stau,
               "saved_slot_acc": sacc, "model_mb": round(size / 1e6, 2),
               "total_minutes": round((time.time() - t_start) / 60, 2), "seed": args.seed}
    write_json(os.path.join(args.out, "training_summary.json"), summary)
    log.log(event="saved", **summary)
    log.close()


if __name__ == "__main__":
    main()
