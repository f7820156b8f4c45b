#!/usr/bin/env python3
"""Checks a drafter written by train_drafter.py against the z-lab reference implementation.

Loads the checkpoint twice: with dflash_model.load_drafter (ours) and with the z-lab `DFlashDraftModel`
(dflash/model.py of the public z-lab/dflash repository, MIT; not part of this repository: put a copy at
.ref/dflash_ref/model.py, an ignored folder) built from the same config.json and loaded from the same
model.safetensors with strict=True. Runs both on the tapped features of a real target forward (context rows
0..s-1) and the block [x_s, mask x 15] at positions s..s+15, in fp32, and compares the hidden states and the
draft argmax. Exits non-zero on a mismatch; prints "skipped" when the reference file is absent.

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


if __name__ == "__main__":
    main()
