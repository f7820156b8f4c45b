#!/usr/bin/env python3
"""Stage 5: tau and per-position acceptance of the drafter on held-out prompts (validation files).

The speculative loop of docs/DFLASH.md §4 with gamma = B - 1 = 15, one prompt at a time, in fp32 (TF32 off):
prefill (all prompt rows become drafter context) -> per step: draft the block [pending, mask x 15] (argmax over
real ids), verify the 16 rows with the target (capturing the tapped features), accept a leading prefix, commit
a + 1 tokens, append the a + 1 verify rows as new drafter context (§5). Acceptance: T = 0 argmax-match;
T > 0 sample-match (a target sample t_k per row from softmax(logits / T), accept while t_k == d_{k+1}, emit
t_a: exactly lossless for a point-mass draft, §6.2). Rollback of the hybrid target (HF caches cannot crop
recurrent GDN state): restore a copy of the cache taken before the verify and replay the a + 1 committed rows
(§7.2 strategy 3); on full acceptance nothing is rolled back.

Reports per temperature: tau = mean(a + 1) over steps, acceptance per position k (P(a >= k), and conditional
P(a >= k | a >= k-1)), steps, tokens, time; at T = 0 it also decodes the first --check-greedy prompts plainly and
reports whether the speculative output equals plain greedy decoding.

Usage: python3 tools/train/eval_tau.py --target work/target --drafter work/drafter --data work/data \
           --out work/eval.json [--num-prompts 32 --prompt-len 64 --max-new 256 --temps 0,0.7]
"""
import argparse
import copy
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import EOT, IM_END, MASK, write_json  # noqa: E402


def _pos(a, b, device):
    import torch
    return torch.arange(a, b, device=device)[None]


def speculative(target, drafter, prompt, temp, gen, *, real_vocab, stop, max_new, propose=None):
    """One prompt through the DFlash loop; returns (emitted tokens, accepted count per step).
    propose(dcache, block, s) -> drafts [1, B-1] replaces the drafter (tests)."""
    import torch
    import targetlib as tl
    device = next(target.parameters()).device
    mask_id, bs, layer_ids = drafter.mask_token_id, drafter.block_size, drafter.target_layer_ids
    embed, lm_head = target.get_input_embeddings(), target.get_output_embeddings()
    with torch.no_grad():
        n_in = len(prompt)
        x = torch.tensor([prompt], device=device)
        out = target(input_ids=x, position_ids=_pos(0, n_in, device), use_cache=True, output_hidden_states=True)
        cache = out.past_key_values
        temps = torch.tensor([temp], device=device)
        pending = int(tl.pick(tl.restrict(out.logits[:, -1], real_vocab, [mask_id]), temps, gen)[0])
        dcache = drafter.new_cache()
        drafter.append_context(dcache, tl.tapped(out.hidden_states, layer_ids))
        s, emitted, accepted = n_in, [pending], []
        while len(emitted) < max_new and pending not in stop:
            block = torch.full((1, bs), mask_id, dtype=torch.long, device=device)
            block[0, 0] = pending
            if propose is None:
                dh = drafter.draft(dcache, embed(block), s)
                drafts = tl.restrict(lm_head(dh[:, 1:]), real_vocab, [mask_id]).argmax(-1)   # [1, B-1]
            else:
                drafts = propose(dcache, block, s)
            block[0, 1:] = drafts[0]
            snapshot = copy.deepcopy(cache)
            vout = target(input_ids=block, position_ids=_pos(s, s + bs, device), past_key_values=cache,
                          use_cache=True, output_hidden_states=True)
            vlog = tl.restrict(vout.logits[0], real_vocab, [mask_id])                       # [B, V]
            if temp == 0:
                picks = vlog.argmax(-1)
            else:
                picks = tl.pick(vlog, torch.full((bs,), temp, device=device), gen)
            a = int((drafts[0] == picks[:-1]).long().cumprod(0).sum())
            nxt = int(picks[a])
            if a < bs - 1:       # rollback: restore the pre-verify cache, replay the a + 1 committed rows
                cache = snapshot
                target(input_ids=block[:, :a + 1], position_ids=_pos(s, s + a + 1, device), past_key_values=cache,
                       use_cache=True)
            drafter.append_context(dcache, tl.tapped(vout.hidden_states, layer_ids)[:, :a + 1])
            accepted.append(a)
            s += a + 1
            pending = nxt
            for t in drafts[0, :a].tolist() + [nxt]:
                emitted.append(t)
                if t in stop:
                    pending = t
                    break
    return emitted[:max_new], accepted


def plain_greedy(target, prompt, n, *, real_vocab, mask_id, stop):
    import torch
    import targetlib as tl
    device = next(target.parameters()).device
    with torch.no_grad():
        x = torch.tensor([prompt], device=device)
        out = target(input_ids=x, position_ids=_pos(0, len(prompt), device), use_cache=True)
        cache = out.past_key_values
        toks = [int(tl.restrict(out.logits[:, -1], real_vocab, [mask_id]).argmax(-1)[0])]
        while len(toks) < n and toks[-1] not in stop:
            p = len(prompt) + len(toks) - 1
            out = target(input_ids=torch.tensor([[toks[-1]]], device=device), position_ids=_pos(p, p + 1, device),
                         past_key_values=cache, use_cache=True)
            toks.append(int(tl.restrict(out.logits[:, -1], real_vocab, [mask_id]).argmax(-1)[0]))
    return toks


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", required=True)
    ap.add_argument("--drafter", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True, help="JSON report")
    ap.add_argument("--num-prompts", type=int, default=32)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--max-new", type=int, default=256)
    ap.add_argument("--temps", default="0,0.7")
    ap.add_argument("--check-greedy", type=int, default=8, help="T=0 prompts also decoded plainly for comparison")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--max-minutes", type=float, default=9.0,
                    help="budget, shared equally by the temperatures: no new prompt is started past a share")
    ap.add_argument("--samples", type=int, default=3, help="sample outputs written to the report")
    args = ap.parse_args()

    import torch
    import dflash_model as dm
    import targetlib as tl

    t_start = time.time()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = "cuda" if torch.cuda.is_available() else "cpu"
    target = tl.load_target(args.target, device, torch.float32)
    drafter = dm.load_drafter(args.drafter, device, torch.float32)
    ids, real_vocab = tl.special_ids(args.target)
    mask_id = drafter.mask_token_id
    assert mask_id == ids[MASK], (mask_id, ids[MASK])
    assert drafter.config["hidden_size"] == target.config.hidden_size
    assert drafter.config["vocab_size"] == target.config.vocab_size
    assert max(drafter.target_layer_ids) < target.config.num_hidden_layers
    stop = {ids[EOT], ids[IM_END]}
    bs = drafter.block_size
    layer_ids = drafter.target_layer_ids

    va_stream, va_docs = tl.load_split(args.data, "val")
    prompts, _ = tl.sample_prompts(va_stream, va_docs, args.num_prompts, args.prompt_len, args.seed,
                                       distinct=True)

    report = {"settings": vars(args), "block_size": bs, "gamma": bs - 1, "target_layer_ids": layer_ids,
              "mask_token_id": mask_id, "device": device, "dtype": "float32", "results": {}}
    temps_list = [float(t) for t in args.temps.split(",")]
    for ti, temp in enumerate(temps_list):
        deadline = t_start + args.max_minutes * 60 * (ti + 1) / len(temps_list)
        gen = torch.Generator(device=device).manual_seed(args.seed)
        all_acc, n_tok, t0, greedy_same, greedy_checked, samples, done = [], 0, time.time(), 0, 0, [], 0
        first_div = []
        for i, prompt in enumerate(prompts.tolist()):
            if time.time() > deadline:
                break
            emitted, acc = speculative(target, drafter, prompt, temp, gen, real_vocab=real_vocab, stop=stop,
                                       max_new=args.max_new)
            all_acc += acc
            n_tok += len(emitted)
            done += 1
            if temp == 0 and i < args.check_greedy:
                ref = plain_greedy(target, prompt, len(emitted), real_vocab=real_vocab, mask_id=mask_id, stop=stop)
                greedy_checked += 1
                greedy_same += int(ref == emitted)
                div = next((j for j, (u, v) in enumerate(zip(ref, emitted)) if u != v), None)
                first_div.append(div)
            if len(samples) < args.samples:
                samples.append({"prompt": tl.decode_ids(args.target, prompt),
                                "completion": tl.decode_ids(args.target, emitted)})
        secs = time.time() - t0
        steps = len(all_acc)
        acc_t = torch.tensor(all_acc, dtype=torch.float32) if steps else torch.zeros(1)
        per_pos = [round(float((acc_t >= k).float().mean()), 4) for k in range(1, bs)]
        cond = []
        for k in range(1, bs):
            den = float((acc_t >= k - 1).float().sum())
            cond.append(round(float((acc_t >= k).float().sum()) / den, 4) if den else None)
        res = {"prompts": done, "steps": steps, "tokens": n_tok,
               "tau": round(float((acc_t + 1).mean()), 4) if steps else None,
               "acceptance_per_position": per_pos, "conditional_acceptance": cond,
               "accepted_histogram": [int((acc_t == k).sum()) for k in range(bs)] if steps else [],
               "seconds": round(secs, 1), "samples": samples}
        if temp == 0:
            res["greedy_check"] = {"checked": greedy_checked, "identical": greedy_same,
                                   "first_divergence": first_div}
        report["results"][f"T={temp:g}"] = res
        print(f"eval T={temp:g}: prompts {done} steps {steps} tokens {n_tok} tau {res['tau']} "
              f"accept@1..5 {per_pos[:5]} ({secs:.1f} s)"
              + (f"; spec == greedy {greedy_same}/{greedy_checked}" if temp == 0 else ""), flush=True)
    report["minutes"] = round((time.time() - t_start) / 60, 2)
    write_json(args.out, report)


if __name__ == "__main__":
    main()
