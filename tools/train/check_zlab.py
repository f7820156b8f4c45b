#!/usr/bin/env python3
"""Checks a drafter written by train_drafter.py against the z-lab reference implementation.

Loads the checkpoint twice: with dflash_model.load_drafter (ours) and with the z-lab `DFlashDraftModel`
(dflash/model.py of the public z-lab/dflash repository, MIT; not part of this repository: put a copy at
.ref/dflash_ref/model.py, an ignored folder) built from the same config.json and loaded from the same
model.safetensors with strict=True. Runs both on the tapped features of a real target forward (context rows
0..s-1) and the block [x_s, mask x 15] at positions s..s+15, in fp32, and compares the hidden states and the
draft argmax. Exits non-zero on a mismatch; prints "skipped" when the reference file is absent.

With --tau N it also runs the z-lab speculative loop (dflash_generate's algorithm, driving the z-lab drafter
module; rollback of the hybrid target by restore-and-replay: tools/reference/dflash/make_fixtures.py
harness_loop) at T=0, gamma = B-1, over the first N held-out prompts that eval_tau.py uses (same seed, prompt
length and max_new), and compares its tau with the T=0 tau in --eval-json (eval_tau.py's report, our drafter
module and loop): they must agree within --tau-tol (relative). Steps after the first emitted stop token are
not counted, as eval_tau.py stops there.

Usage: python3 tools/train/check_zlab.py --target work/target --drafter work/drafter --data work/data
"""
import argparse
import importlib.util
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--drafter", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--ref", default=os.environ.get("DFLASH_REF", ".ref/dflash_ref") + "/model.py")
    ap.add_argument("--ctx", type=int, default=48)
    ap.add_argument("--tau", type=int, default=0, help="prompts for the tau cross-check (0: skip)")
    ap.add_argument("--eval-json", help="eval_tau.py report to compare tau with")
    ap.add_argument("--tau-tol", type=float, default=0.03)
    args = ap.parse_args()
    if not os.path.exists(args.ref):
        print(f"check_zlab: skipped ({args.ref} not present)")
        return
    import torch
    from safetensors.torch import load_file
    from transformers import Qwen3Config
    import dflash_model as dm
    import targetlib as tl

    torch.backends.cuda.matmul.allow_tf32 = False
    device = "cuda" if torch.cuda.is_available() else "cpu"
    spec = importlib.util.spec_from_file_location("zlab_dflash_model", args.ref)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)

    ours = dm.load_drafter(args.drafter, device, torch.float32)
    cfg = Qwen3Config.from_pretrained(args.drafter)
    theirs = ref.DFlashDraftModel(cfg)
    state = load_file(os.path.join(args.drafter, "model.safetensors"))
    missing, unexpected = theirs.load_state_dict(state, strict=False)
    missing = [k for k in missing if "rotary" not in k]
    assert not missing and not unexpected, (missing, unexpected)
    theirs = theirs.to(device=device, dtype=torch.float32).eval()
    assert theirs.target_layer_ids == ours.target_layer_ids, (theirs.target_layer_ids, ours.target_layer_ids)
    assert theirs.mask_token_id == ours.mask_token_id and theirs.block_size == ours.block_size

    target = tl.load_target(args.target, device, torch.float32)
    stream, _ = tl.load_split(args.data, "val")
    s, bs = args.ctx, ours.block_size
    x = torch.tensor(stream[:s + 1].astype("int64"), device=device)[None]
    with torch.no_grad():
        out = target(input_ids=x[:, :s], output_hidden_states=True, use_cache=False, **tl.keep_last(target))
        feats = tl.tapped(out.hidden_states, ours.target_layer_ids)
        block = torch.full((1, bs), ours.mask_token_id, dtype=torch.long, device=device)
        block[0, 0] = x[0, s]
        noise = target.get_input_embeddings()(block)
        cache = ours.new_cache()
        ours.append_context(cache, feats)
        h_ours = ours.draft(cache, noise, s)
        h_theirs = theirs(target_hidden=feats, noise_embedding=noise,
                          position_ids=torch.arange(0, s + bs, device=device)[None],
                          past_key_values=None, use_cache=False, is_causal=False)
        if not torch.is_tensor(h_theirs):
            h_theirs = h_theirs[0]
        diff = (h_ours - h_theirs).abs().max().item()
        head = target.get_output_embeddings()
        d_ours = head(h_ours[:, 1:]).argmax(-1)
        d_theirs = head(h_theirs[:, 1:]).argmax(-1)
    same = bool((d_ours == d_theirs).all())
    print(f"check_zlab: max |hidden diff| {diff:.2e}, draft argmax identical: {same}", flush=True)
    if diff > 1e-3 or not same:
        sys.exit(1)
    if args.tau:
        tau_cross_check(args, ref, theirs, target)


def tau_cross_check(args, ref, drafter, target):
    import json
    import torch
    import targetlib as tl
    from common import EOT, IM_END
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference", "dflash"))
    from make_fixtures import harness_loop

    settings, ours = {}, None
    if args.eval_json:
        with open(args.eval_json) as f:
            report = json.load(f)
        settings, ours = report["settings"], report["results"]["T=0"]
    n = min(args.tau, ours["prompts"]) if ours else args.tau
    ids, _ = tl.special_ids(args.target)
    stop = {ids[EOT], ids[IM_END]}
    va_stream, va_docs = tl.load_split(args.data, "val")
    prompts, _ = tl.sample_prompts(va_stream, va_docs, settings.get("num_prompts", 32),
                                   settings.get("prompt_len", 64), settings.get("seed", 2024), distinct=True)
    max_new = settings.get("max_new", 256)
    accepted = []
    with torch.no_grad():
        for prompt in prompts.tolist()[:n]:
            _, steps, _ = harness_loop(ref, drafter, target, prompt, max_new, hybrid=True)
            for st in steps:
                accepted.append(st["accepted"])
                if any(t in stop for t in st["emitted"]):
                    break
    tau = sum(a + 1 for a in accepted) / max(1, len(accepted))
    line = f"check_zlab: z-lab loop tau {tau:.4f} over {n} prompts, {len(accepted)} steps"
    if ours:
        rel = abs(tau - ours["tau"]) / ours["tau"]
        print(f"{line}; eval_tau tau {ours['tau']} over {ours['prompts']} prompts, {ours['steps']} steps; "
              f"relative difference {rel:.4f} (tolerance {args.tau_tol})", flush=True)
        if rel > args.tau_tol:
            sys.exit(1)
    else:
        print(line, flush=True)


if __name__ == "__main__":
    main()
