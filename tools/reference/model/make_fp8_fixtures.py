#!/usr/bin/env python3
"""Builds tiny FP8 (Qwen's block-128 format) target-model fixtures with Hugging Face transformers.

Each fixture is a random tiny model saved in bf16, reloaded with transformers' FineGrainedFP8Config
(weight_block_size 128 x 128) — which quantises every nn.Linear except those in NOT_CONVERTED to
float8_e4m3fn with a weight_scale_inv per 128 x 128 block — and saved again with save_pretrained: the
layout of Qwen/Qwen3-8B-FP8 (config.json quantization_config with quant_method "fp8"; bf16 embeddings,
norms, lm_head, and on Qwen3.5 DeltaNet's in_proj_a / in_proj_b, conv1d, A_log, dt_bias, norm).

Beside it, reference.safetensors holds what the DEQUANTISED model computes in fp32 on the CPU, with the keys
of make_fixtures.py (prompt_ids, prompt_logits, greedy_ids, decode_logits, extend_ids, extend_logits,
hidden_layers, hidden). The dequantised model is built from the saved files, not from transformers' own
FP8 path: every F8_E4M3 weight becomes float32(weight) * float32(scale) of its block (one f32 multiply per
element, which is what `specserve --dtype f32` computes, docs/MODELS.md §6), every other tensor is widened
to f32, and the result is loaded into a plain fp32 model of the same config. As a cross-check of that
reading of the format, the metadata records how far transformers' own dequantising load
(FineGrainedFP8Config(dequantize=True)) lands from the reference prompt logits.

Fixtures:
  qwen3_fp8               Qwen3ForCausalLM, 3 layers, untied (lm_head kept bf16), F32 scales as transformers
                          writes them
  qwen3_5_fp8             Qwen3_5ForCausalLM (flat layout), 3 Gated DeltaNet + 1 gated attention layer, tied,
                          F32 scales
  qwen3_fp8_bf16_scales   qwen3_fp8 with every weight_scale_inv rounded to bf16 after saving (the codes are
                          kept; the reference is recomputed from the rewritten files)

Every Linear dimension is a multiple of 128 (transformers' quantiser requires whole blocks), so these
fixtures have no ragged blocks; tests/io/test_fp8_blocks.cpp and tests/model/test_fp8_checkpoint.cpp cover
those with checkpoints built in C++.

Run on a machine with a CUDA GPU of compute capability >= 8.9 (transformers quantises to FP8 only there;
the references themselves run on the CPU in fp32). Needs torch, transformers >= 5, safetensors:
  python3 tools/reference/model/make_fp8_fixtures.py OUTDIR
Writes OUTDIR/<fixture>/... and OUTDIR/fp8_fixtures.tar (all of them) and prints a summary.
"""
import glob
import json
import os
import shutil
import sys

# make_fixtures hides the GPU unless CUDA_VISIBLE_DEVICES is already set; the quantising load needs one.
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (offline environment, imports torch)

import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

BLOCK = 128
HIDDEN = 256
INTERMEDIATE = 384
# Kept in bf16, as in Qwen's FP8 releases (and lm_head, which transformers never quantises by default).
NOT_CONVERTED = ["lm_head", "in_proj_a", "in_proj_b"]
ROPE_QWEN3 = {"rope_type": "default", "rope_theta": 1000000.0}
ROPE_QWEN3_5 = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                "mrope_section": [2, 1, 1], "mrope_interleaved": True}

torch.set_grad_enabled(False)
torch.set_default_dtype(torch.float32)


def qwen3_config():
    # q_proj [256, 256], k/v_proj [128, 256], o_proj [256, 256], gate/up [384, 256], down [256, 384].
    return transformers.Qwen3Config(
        vocab_size=mf.VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_hidden_layers=3,
        num_attention_heads=2, num_key_value_heads=1, head_dim=128, max_position_embeddings=512,
        rms_norm_eps=1e-6, initializer_range=mf.INIT_RANGE, tie_word_embeddings=False,
        rope_parameters=ROPE_QWEN3, bos_token_id=1, eos_token_id=2)


def qwen3_5_config():
    # Gated q_proj [512, 256]; DeltaNet in_proj_qkv [256 + 128, 256], in_proj_z [128, 256], out_proj
    # [256, 128]; in_proj_a / in_proj_b [2, 256] stay bf16.
    return transformers.Qwen3_5TextConfig(
        vocab_size=mf.VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_hidden_layers=4,
        num_attention_heads=2, num_key_value_heads=1, head_dim=128, max_position_embeddings=512,
        rms_norm_eps=1e-6, initializer_range=mf.INIT_RANGE, tie_word_embeddings=True,
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        linear_conv_kernel_dim=4, linear_key_head_dim=64, linear_value_head_dim=64,
        linear_num_key_heads=2, linear_num_value_heads=2, rope_parameters=ROPE_QWEN3_5,
        bos_token_id=1, eos_token_id=2)


def quantize_with_transformers(cls, model, bf16_dir, fp8_dir):
    """Saves `model` in bf16, reloads it on the GPU with FineGrainedFP8Config (block 128), which
    quantises at load, and saves the quantised model to fp8_dir. Returns the quantization_config dict."""
    model.to(torch.bfloat16).save_pretrained(bf16_dir)
    qcfg = transformers.FineGrainedFP8Config(weight_block_size=(BLOCK, BLOCK), modules_to_not_convert=NOT_CONVERTED)
    quantized = cls.from_pretrained(bf16_dir, quantization_config=qcfg, dtype=torch.bfloat16, device_map="cuda")
    quantized.save_pretrained(fp8_dir)
    return json.loads(json.dumps(quantized.config.quantization_config.to_dict(), default=str))


def read_state(path):
    state = {}
    for fn in sorted(glob.glob(os.path.join(path, "*.safetensors"))):
        if os.path.basename(fn) != "reference.safetensors":
            state.update(load_file(fn))
    return state


def dequantize(weight, scale):
    """float32(weight) * float32(scale[r // 128, c // 128]): the multiplier, whatever its name says."""
    rows, cols = weight.shape
    s = scale.to(torch.float32).repeat_interleave(BLOCK, 0)[:rows].repeat_interleave(BLOCK, 1)[:, :cols]
    return weight.to(torch.float32) * s


def dequantized_state(path):
    """The checkpoint in `path` with every F8_E4M3 weight dequantised and every tensor in f32, and a
    description of what was found (fp8 tensors, their scale dtypes, the tensors kept in floats)."""
    state = read_state(path)
    out, fp8, scale_dtypes = {}, [], set()
    for name, t in state.items():
        if name.endswith("_scale_inv"):
            if name[: -len("_scale_inv")] not in state:
                raise ValueError(f"scale {name} without its weight")
            continue
        if t.dtype == torch.float8_e4m3fn:
            scale = state[name + "_scale_inv"]  # KeyError: an fp8 weight without its scale
            want = ((t.shape[0] + BLOCK - 1) // BLOCK, (t.shape[1] + BLOCK - 1) // BLOCK)
            if tuple(scale.shape) != want:
                raise ValueError(f"{name}: scale shape {tuple(scale.shape)}, expected {want}")
            out[name] = dequantize(t, scale).contiguous()
            fp8.append(name)
            scale_dtypes.add(str(scale.dtype))
        else:
            out[name] = t.to(torch.float32).contiguous()
    kept = sorted(n for n in state if n not in fp8 and not n.endswith("_scale_inv"))
    return out, {"fp8_tensors": len(fp8), "scale_dtypes": sorted(scale_dtypes), "kept_tensors": kept}


def reference_model(cls, path, state):
    """A plain fp32 model of the checkpoint's config holding the dequantised weights."""
    config = cls.config_class.from_pretrained(path)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = cls(config).to(torch.float32)
    missing, unexpected = model.load_state_dict(state, strict=False)
    allowed_missing = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if set(missing) - allowed_missing or unexpected:
        raise ValueError(f"state dict mismatch: missing {missing}, unexpected {unexpected}")
    if config.tie_word_embeddings:
        model.tie_weights()
    return mf.eager(model)


def transformers_dequantized_diff(cls, path, refs):
    """Max |logits| difference between transformers' own dequantising load of the FP8 checkpoint and the
    reference (a cross-check of the multiplier reading; transformers may round through bf16)."""
    try:
        qcfg = transformers.FineGrainedFP8Config(dequantize=True)
        m = mf.eager(cls.from_pretrained(path, quantization_config=qcfg, dtype=torch.float32, device_map="cpu"))
        logits = mf.logits_of(m(input_ids=refs["prompt_ids"][None])).float()
        return float((logits - refs["prompt_logits"]).abs().max())
    except Exception as e:  # API differences across versions: recorded, not fatal
        return "unavailable: " + repr(e)[:200]


def finish(cls, path, seed, meta):
    """Computes and saves the dequantised model's reference; returns the summary."""
    state, found = dequantized_state(path)
    model = reference_model(cls, path, state)
    gen = torch.Generator().manual_seed(seed)
    refs, margin = mf.reference(model, gen, model.config.num_hidden_layers)
    meta = dict(meta, min_top2_margin_prompt=margin, fp8_tensors=found["fp8_tensors"],
                scale_dtypes=",".join(found["scale_dtypes"]), transformers=transformers.__version__,
                torch=torch.__version__)
    meta["transformers_dequantized_max_abs_diff"] = transformers_dequantized_diff(cls, path, refs)
    mf.save_reference(path, refs, meta)
    return dict(meta, kept_in_floats=found["kept_tensors"])


def make_fp8(outdir, name, cls, config, seed, hybrid):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = mf.eager(cls(config))
    mf.perturb_norms(model, gen, hybrid)
    if hybrid:
        mf.tune_deltanet(model, gen)
    path = os.path.join(outdir, name)
    work = path + ".bf16-source"
    qcfg = quantize_with_transformers(cls, model, work, path)
    shutil.rmtree(work, ignore_errors=True)
    return finish(cls, path, seed + 100, {"family": "qwen3_5" if hybrid else "qwen3", "quantization_config": qcfg})


def make_bf16_scales(outdir, source, name, cls, seed):
    """A copy of fixture `source` whose weight_scale_inv tensors are rewritten as bf16."""
    src, path = os.path.join(outdir, source), os.path.join(outdir, name)
    shutil.rmtree(path, ignore_errors=True)
    shutil.copytree(src, path, ignore=shutil.ignore_patterns("reference.safetensors"))
    for fn in glob.glob(os.path.join(path, "*.safetensors")):
        tensors = load_file(fn)
        for k in tensors:
            if k.endswith("_scale_inv"):
                tensors[k] = tensors[k].to(torch.bfloat16).contiguous()
        save_file(tensors, fn, metadata={"format": "pt"})
    return finish(cls, path, seed, {"family": "qwen3", "derived_from": source, "scales": "rounded to bf16"})


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "fp8_fixtures_out"
    os.makedirs(outdir, exist_ok=True)
    print("torch", torch.__version__, "transformers", transformers.__version__, flush=True)
    if not torch.cuda.is_available():
        print("warning: no CUDA device: transformers cannot quantise to FP8 here", flush=True)
    jobs = [
        ("qwen3_fp8", lambda: make_fp8(outdir, "qwen3_fp8", transformers.Qwen3ForCausalLM, qwen3_config(), 21,
                                       hybrid=False)),
        ("qwen3_5_fp8", lambda: make_fp8(outdir, "qwen3_5_fp8", transformers.Qwen3_5ForCausalLM, qwen3_5_config(),
                                         22, hybrid=True)),
        ("qwen3_fp8_bf16_scales", lambda: make_bf16_scales(outdir, "qwen3_fp8", "qwen3_fp8_bf16_scales",
                                                           transformers.Qwen3ForCausalLM, 121)),
    ]
    mf.run_jobs(outdir, jobs, "fp8_summary.json", "fp8_fixtures.tar")


if __name__ == "__main__":
    main()
