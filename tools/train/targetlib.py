"""Target-side helpers shared by train_drafter.py and eval_tau.py: loading, prompt sampling, batched generation,
feature capture (docs/DFLASH.md §1.2 / §8: the output of decoder layer l is HF hidden_states[l + 1]), and token picks
restricted to real ids (the mask token and the padding rows never win)."""
import functools
import inspect
import json
import os

import numpy as np
import torch


def load_target(path, device, dtype=torch.float32):
    from transformers import Qwen3_5ForCausalLM
    model = Qwen3_5ForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def special_ids(target_dir):
    with open(os.path.join(target_dir, "tokenizer.json")) as f:
        tj = json.load(f)
    ids = {a["content"]: a["id"] for a in tj["added_tokens"]}
    real_vocab = len(tj["model"]["vocab"]) + len(tj["added_tokens"])
    return ids, real_vocab


def load_split(data_dir, split):
    stream = np.fromfile(os.path.join(data_dir, f"{split}.bin"), dtype=np.uint16)
    docs = np.load(os.path.join(data_dir, f"{split}_docs.npy"))
    return stream, docs


def sample_prompts(stream, docs, n, prompt_len, seed, min_rest=16, start_frac=0.25, distinct=False):
    """n prompts of prompt_len tokens, each inside one file (never across a separator): a random file of at
    least prompt_len + min_rest tokens; from its start with probability start_frac, else at a random offset.
    Deterministic in seed. distinct: each file at most once (as far as there are files)."""
    rng = np.random.RandomState(seed)
    lens = docs[:, 1] - docs[:, 0]
    ok = np.nonzero(lens >= prompt_len + min_rest)[0]
    if len(ok) == 0:
        raise ValueError(f"no file has {prompt_len + min_rest} tokens")
    if distinct and n <= len(ok):
        chosen = rng.choice(ok, size=n, replace=False)
    else:
        chosen = rng.choice(ok, size=n, replace=True)
    out = np.empty((n, prompt_len), dtype=np.int64)
    meta = []
    for i, d in enumerate(chosen):
        start, end = int(docs[d, 0]), int(docs[d, 1])
        span = end - start - prompt_len - min_rest
        off = 0 if rng.rand() < start_frac else int(rng.randint(0, span + 1))
        out[i] = stream[start + off:start + off + prompt_len]
        meta.append((int(d), off))
    return out, meta


def restrict(logits, real_vocab, banned):
    """Logits over real ids only, banned ids (the mask token) at -inf."""
    logits = logits[..., :real_vocab].float()
    if banned:
        logits = logits.clone()
        logits[..., banned] = float("-inf")
    return logits


def pick(logits, temps, gen):
    """Per-row pick: argmax where temps == 0 (lowest index wins ties), else a sample of softmax(logits / T)."""
    greedy = logits.argmax(-1)
    if temps is None or not bool((temps > 0).any()):
        return greedy
    t = temps.clamp_min(1e-6)[:, None]
    probs = torch.softmax(logits / t, dim=-1)
    sampled = torch.multinomial(probs, 1, generator=gen)[:, 0]
    return torch.where(temps > 0, sampled, greedy)


def keep_last(target):
    """{"logits_to_keep": 1} when the model's forward takes it (only the last row's logits are computed)."""
    try:
        return {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(target.forward).parameters else {}
    except (TypeError, ValueError):
        return {}


@functools.lru_cache(maxsize=4)
def _tokenizer(target_dir):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(os.path.join(target_dir, "tokenizer.json"))


def decode_ids(target_dir, ids):
    return _tokenizer(target_dir).decode(list(ids), skip_special_tokens=False)


@torch.no_grad()
def generate(target, prompts, n_new, temps, gen, real_vocab, banned):
    """Batched continuation (no stop: the target's own text, EOS included, for n_new tokens).
    prompts [n, P] long on the target's device; returns [n, P + n_new]."""
    out = target(input_ids=prompts, use_cache=True, **keep_last(target))
    cache = out.past_key_values
    toks = []
    logits = restrict(out.logits[:, -1], real_vocab, banned)
    for i in range(n_new):
        nxt = pick(logits, temps, gen)
        toks.append(nxt)
        if i + 1 == n_new:
            break
        out = target(input_ids=nxt[:, None], past_key_values=cache, use_cache=True)
        logits = restrict(out.logits[:, -1], real_vocab, banned)
    return torch.cat([prompts, torch.stack(toks, dim=1)], dim=1)


def tapped(hidden_states, layer_ids):
    """Concatenated outputs of target layers layer_ids (z-lab convention: hidden_states[l + 1])."""
    return torch.cat([hidden_states[l + 1] for l in layer_ids], dim=-1)


@torch.no_grad()
def check_tap_convention(target, input_ids, layer_ids):
    """Max |hidden_states[l+1] - output of decoder layer l| over layer_ids (forward hooks); should be 0."""
    captured = {}
    hooks = []
    layers = target.model.layers
    for l in layer_ids:
        def hook(_m, _inp, out, l=l):
            captured[l] = out[0] if isinstance(out, tuple) else out
        hooks.append(layers[l].register_forward_hook(hook))
    try:
        out = target(input_ids=input_ids, output_hidden_states=True, use_cache=False, **keep_last(target))
    finally:
        for h in hooks:
            h.remove()
    return max((out.hidden_states[l + 1].float() - captured[l].float()).abs().max().item() for l in layer_ids)
