#!/usr/bin/env python3
"""Builds the tiny target-model fixtures of tests/fixtures/model/ with Hugging Face transformers.

Each fixture is a directory the C++ loader reads exactly as it would read a real checkpoint
(config.json + model.safetensors written by save_pretrained) plus reference.safetensors with what
transformers computes in fp32:

  prompt_ids      I64 [P]        random prompt (P > 64 so the DeltaNet prefill spans two chunks and
                                 the KV cache several 16-token blocks)
  prompt_logits   F32 [P, V]     logits at every prompt position (one prefill forward)
  greedy_ids      I64 [N]        greedy continuation (argmax, first index on ties), N >= 32
  decode_logits   F32 [D, V]     logits of the first D single-token decode steps (row i: after
                                 feeding greedy_ids[i], i.e. the distribution of greedy_ids[i+1])
  extend_ids      I64 [E]        random tokens fed in ONE forward on top of the prompt's cache
  extend_logits   F32 [E, V]     their logits (transformers' multi-token-from-cache path)
  hidden_layers   I64 [C]        decoder layer indices l
  hidden          F32 [C, P, H]  output of decoder layer l for every prompt row (= HF hidden_states[l+1],
                                 taken with a forward hook on the layer, never post-final-norm)

Fixtures:
  qwen3_untied   Qwen3ForCausalLM, separate lm_head
  qwen3_tied     Qwen3ForCausalLM, tie_word_embeddings (no lm_head.weight in the file)
  qwen3_5_flat   Qwen3_5ForCausalLM (flat model.* layout), 3 Gated DeltaNet + 1 gated attention layer
  qwen3_5_vl     Qwen3_5ForConditionalGeneration layout: model.language_model.*, a tiny model.visual.*
                 tower, top-level lm_head, nested config.json with text_config, plus an injected mtp.*
                 tensor (real checkpoints carry one; loaders must skip it)

Weights use a large init range so next-token distributions are peaky (greedy is robust to fp32
rounding), and every norm weight is perturbed away from its init (ones, or zeros for the
zero-centred norms) so a wrong norm flavour cannot pass. DeltaNet decay parameters are set so the
recurrent state carries information across many tokens (alpha = e^g around 0.5-0.8).

Run (CPU is enough; needs torch, transformers >= 5, safetensors):
  python3 tools/reference/model/make_fixtures.py OUTDIR
Writes OUTDIR/<fixture>/... and OUTDIR/fixtures.tar (all of them) and prints a summary.
"""
import json
import os
import sys
import tarfile
import traceback

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

VOCAB = 512
HIDDEN = 48
PROMPT_LEN = 66      # > 64: two DeltaNet chunks, five KV blocks
GREEDY_LEN = 36
DECODE_LOGITS = 8
EXTEND_LEN = 7
INIT_RANGE = 0.5

torch.set_grad_enabled(False)
torch.set_default_dtype(torch.float32)


def eager(model):
    try:
        model.set_attn_implementation("eager")
    except Exception:  # older API
        model.config._attn_implementation = "eager"
    return model.eval()


def perturb_norms(model, gen, zero_centred_family):
    """Moves every RMSNorm weight away from its init. In Qwen3.5 every norm is zero-centred (weight
    used as 1 + w, init 0) except the DeltaNet output norm linear_attn.norm (plain, init 1)."""
    for name, p in model.named_parameters():
        if not name.endswith("norm.weight"):
            continue
        noise = 0.3 * torch.randn(p.shape, generator=gen)
        zero_centred = zero_centred_family and not name.endswith("linear_attn.norm.weight")
        p.copy_(noise if zero_centred else 1.0 + noise)


def tune_deltanet(model, gen):
    """Decay and gate parameters that keep a long memory in the recurrent state."""
    for name, mod in model.named_modules():
        if type(mod).__name__ != "Qwen3_5GatedDeltaNet":
            continue
        hv = mod.num_v_heads
        mod.A_log.copy_(torch.empty(hv).uniform_(0.05, 0.6, generator=gen).log())
        mod.dt_bias.copy_(1.0 + 0.3 * torch.randn(hv, generator=gen))
        mod.in_proj_a.weight.copy_(0.1 * torch.randn(mod.in_proj_a.weight.shape, generator=gen))
        mod.in_proj_b.weight.copy_(0.2 * torch.randn(mod.in_proj_b.weight.shape, generator=gen))
        mod.conv1d.weight.copy_(0.5 * torch.randn(mod.conv1d.weight.shape, generator=gen))


def layers_of(model):
    m = model.model
    if hasattr(m, "language_model"):
        m = m.language_model
    return m.layers


def logits_of(out):
    return out.logits[0].float()


def reference(model, gen, num_layers):
    """Runs the reference computations; returns a dict of tensors for reference.safetensors."""
    prompt = torch.randint(0, VOCAB, (PROMPT_LEN,), generator=gen)
    extend = torch.randint(0, VOCAB, (EXTEND_LEN,), generator=gen)
    hidden_layers = [1, num_layers - 1]

    captured = {}
    hooks = []
    for l in hidden_layers:
        def hook(mod, inp, out, l=l):
            h = out[0] if isinstance(out, tuple) else out
            captured[l] = h[0].detach().clone()
        hooks.append(layers_of(model)[l].register_forward_hook(hook))
    out = model(input_ids=prompt[None], use_cache=True)
    for h in hooks:
        h.remove()
    prompt_logits = logits_of(out)
    cache = out.past_key_values

    greedy, decode_logits = [], []
    last = prompt_logits[-1]
    for i in range(GREEDY_LEN):
        tok = int(torch.argmax(last))  # first maximal index: ties go to the lowest id
        greedy.append(tok)
        out = model(input_ids=torch.tensor([[tok]]), past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        last = logits_of(out)[-1]
        if i < DECODE_LOGITS:
            decode_logits.append(last)

    # A fresh prefill gives the cache to extend from (the greedy loop advanced the first one).
    cache_for_extend = model(input_ids=prompt[None], use_cache=True).past_key_values
    out = model(input_ids=extend[None], past_key_values=cache_for_extend, use_cache=True)
    extend_logits = logits_of(out)

    # Top-2 margins tell how robust greedy is to rounding (recorded for diagnosis).
    top2 = torch.topk(prompt_logits, 2, dim=-1).values
    margins = (top2[:, 0] - top2[:, 1])
    return {
        "prompt_ids": prompt.to(torch.int64),
        "prompt_logits": prompt_logits.contiguous(),
        "greedy_ids": torch.tensor(greedy, dtype=torch.int64),
        "decode_logits": torch.stack(decode_logits).contiguous(),
        "extend_ids": extend.to(torch.int64),
        "extend_logits": extend_logits.contiguous(),
        "hidden_layers": torch.tensor(hidden_layers, dtype=torch.int64),
        "hidden": torch.stack([captured[l] for l in hidden_layers]).float().contiguous(),
    }, float(margins.min())


def check_reload(cls, path, refs):
    """Reloads the saved directory and checks the prompt logits (guards save/tie mistakes)."""
    m = eager(cls.from_pretrained(path, dtype=torch.float32))
    logits = logits_of(m(input_ids=refs["prompt_ids"][None]))
    return float((logits - refs["prompt_logits"]).abs().max())


def save_reference(path, refs, meta):
    save_file(refs, os.path.join(path, "reference.safetensors"),
              metadata={k: str(v) for k, v in meta.items()})


def make_qwen3(outdir, name, tied, seed):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    cfg = transformers.Qwen3Config(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=512,
        rms_norm_eps=1e-6, initializer_range=INIT_RANGE, tie_word_embeddings=tied,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        bos_token_id=1, eos_token_id=2)
    model = eager(transformers.Qwen3ForCausalLM(cfg))
    perturb_norms(model, gen, False)
    path = os.path.join(outdir, name)
    model.save_pretrained(path)
    refs, margin = reference(model, gen, cfg.num_hidden_layers)
    diff = check_reload(transformers.Qwen3ForCausalLM, path, refs)
    save_reference(path, refs, {"family": "qwen3", "tied": tied, "reload_max_abs_diff": diff,
                                "min_top2_margin_prompt": margin, "transformers": transformers.__version__,
                                "torch": torch.__version__})
    return {"reload_max_abs_diff": diff, "min_top2_margin": margin}


def qwen3_5_text_config(tied):
    return dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=512,
        rms_norm_eps=1e-6, initializer_range=INIT_RANGE, tie_word_embeddings=tied,
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
        linear_num_key_heads=2, linear_num_value_heads=4,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                         "mrope_section": [2, 1, 1], "mrope_interleaved": True},
        bos_token_id=1, eos_token_id=2)


def make_qwen3_5_flat(outdir, name, seed):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    cfg = transformers.Qwen3_5TextConfig(**qwen3_5_text_config(tied=True))
    model = eager(transformers.Qwen3_5ForCausalLM(cfg))
    perturb_norms(model, gen, True)
    tune_deltanet(model, gen)
    path = os.path.join(outdir, name)
    model.save_pretrained(path)
    refs, margin = reference(model, gen, cfg.num_hidden_layers)
    diff = check_reload(transformers.Qwen3_5ForCausalLM, path, refs)
    save_reference(path, refs, {"family": "qwen3_5", "layout": "flat", "tied": True, "reload_max_abs_diff": diff,
                                "min_top2_margin_prompt": margin, "transformers": transformers.__version__,
                                "torch": torch.__version__})
    return {"reload_max_abs_diff": diff, "min_top2_margin": margin}


def make_qwen3_5_vl(outdir, name, seed):
    """The Qwen3_5ForConditionalGeneration layout. The text model is built and referenced as a
    Qwen3_5ForCausalLM; its weights go into a real ConditionalGeneration model (tiny vision tower)
    that save_pretrained writes. If that class cannot be built, the text weights are saved renamed
    with a hand-written nested config (the fallback is reported in the metadata)."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    text = qwen3_5_text_config(tied=False)
    cfg = transformers.Qwen3_5TextConfig(**text)
    model = eager(transformers.Qwen3_5ForCausalLM(cfg))
    perturb_norms(model, gen, True)
    tune_deltanet(model, gen)
    refs, margin = reference(model, gen, cfg.num_hidden_layers)
    path = os.path.join(outdir, name)
    meta = {"family": "qwen3_5", "layout": "model.language_model", "tied": False, "min_top2_margin_prompt": margin,
            "transformers": transformers.__version__, "torch": torch.__version__}
    try:
        vision = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, in_channels=3, patch_size=2,
                      spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=HIDDEN,
                      num_position_embeddings=4, initializer_range=0.02)
        full = transformers.Qwen3_5Config(text_config=text, vision_config=vision, tie_word_embeddings=False)
        cg = eager(transformers.Qwen3_5ForConditionalGeneration(full))
        cg.model.language_model.load_state_dict(model.model.state_dict())
        cg.lm_head.weight.copy_(model.lm_head.weight)
        cg.save_pretrained(path)
        meta["writer"] = "Qwen3_5ForConditionalGeneration.save_pretrained"
        try:
            meta["reload_max_abs_diff"] = check_reload(transformers.Qwen3_5ForConditionalGeneration, path, refs)
        except Exception as e:  # the reference itself comes from the text model
            meta["reload_error"] = repr(e)[:300]
    except Exception as e:
        traceback.print_exc()
        meta["writer"] = "renamed text weights (fallback): " + repr(e)[:200]
        os.makedirs(path, exist_ok=True)
        sd = {}
        for k, v in model.state_dict().items():
            if k.startswith("model."):
                sd["model.language_model." + k[len("model."):]] = v.contiguous()
            elif k == "lm_head.weight":
                sd[k] = v.contiguous()
        save_file(sd, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
        text_json = json.loads(cfg.to_json_string())
        text_json["model_type"] = "qwen3_5_text"
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump({"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
                       "text_config": text_json, "vision_config": {"model_type": "qwen3_5_vision", "depth": 1},
                       "tie_word_embeddings": False, "dtype": "float32"}, f, indent=2)
    # Real Qwen3.5/3.6 checkpoints carry an MTP head that transformers ignores; add one tensor.
    st = os.path.join(path, "model.safetensors")
    sd = load_file(st)
    sd["mtp.fc.weight"] = torch.randn(HIDDEN, 2 * HIDDEN, generator=gen)
    save_file(sd, st, metadata={"format": "pt"})
    save_reference(path, refs, meta)
    return meta


def run_jobs(outdir, jobs, summary_name, tar_name):
    """Runs each (name, job) (a job builds outdir/name and returns its summary), keeps going past a
    failure, writes the summaries to outdir/summary_name and the fixture folders to outdir/tar_name (for
    carrying back from the GPU machine), lists the files, and returns the summaries."""
    summary = {}
    for name, job in jobs:
        try:
            summary[name] = job()
        except Exception as e:
            traceback.print_exc()
            summary[name] = {"error": repr(e)[:500]}
        print(name, json.dumps(summary[name]), flush=True)
    with open(os.path.join(outdir, summary_name), "w") as f:
        json.dump(summary, f, indent=2)
    with tarfile.open(os.path.join(outdir, tar_name), "w") as tar:
        for name, _ in jobs:
            p = os.path.join(outdir, name)
            if os.path.isdir(p):
                tar.add(p, arcname=name)
        tar.add(os.path.join(outdir, summary_name), arcname=summary_name)
    for name, _ in jobs:
        p = os.path.join(outdir, name)
        if os.path.isdir(p):
            for fn in sorted(os.listdir(p)):
                print(f"  {name}/{fn}: {os.path.getsize(os.path.join(p, fn))} bytes")
    return summary


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "fixtures_out"
    os.makedirs(outdir, exist_ok=True)
    print("torch", torch.__version__, "transformers", transformers.__version__, flush=True)
    try:
        from transformers.utils import is_flash_linear_attention_available
        print("flash-linear-attention available:", is_flash_linear_attention_available(), flush=True)
    except Exception:
        pass
    jobs = [
        ("qwen3_untied", lambda: make_qwen3(outdir, "qwen3_untied", tied=False, seed=11)),
        ("qwen3_tied", lambda: make_qwen3(outdir, "qwen3_tied", tied=True, seed=12)),
        ("qwen3_5_flat", lambda: make_qwen3_5_flat(outdir, "qwen3_5_flat", seed=13)),
        ("qwen3_5_vl", lambda: make_qwen3_5_vl(outdir, "qwen3_5_vl", seed=14)),
    ]
    run_jobs(outdir, jobs, "summary.json", "fixtures.tar")


if __name__ == "__main__":
    main()
