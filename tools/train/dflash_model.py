#!/usr/bin/env python3
"""The DFlash drafter (docs/DFLASH.md §1), written for this project, in the z-lab checkpoint format (§2).

A stack of Qwen3 pre-norm decoder layers with KV injection:
  c_t = hidden_norm(fc([h_t^(l1); ...; h_t^(lK)]))       context rows: outputs of the target layers l_i
  layer j: u = input_layernorm(z); Q from the block only; K/V = [k_norm(k_proj c) + RoPE ; k_norm(k_proj u) + RoPE],
           [v_proj c ; v_proj u]; attention over context + block with no causal mask; z += o_proj(attn);
           z += mlp(post_attention_layernorm(z))
  out = norm(z); logits = the target's lm_head(out); slot k (position s + k) predicts the token AT s + k.
The block is [pending token, mask x (B-1)] embedded with the target's (frozen) embedding table. The drafter has
no embedding and no lm_head of its own. Norms are plain RMSNorms (normalise in fp32, cast back, times weight);
RoPE is rotate_half over the full head_dim with the drafter's own theta.

Two ways to run it:
  forward_train  packed training forward: per sequence, all context rows once plus N anchor blocks; a block at
                 anchor a sees the context rows < a and its own block, never other blocks (docs/DFLASH.md §9).
  append_context + draft   inference: context K/V cached per layer (permanent), block K/V temporary.
`python3 dflash_model.py --selftest` checks that the two agree (packed == one anchor at a time).

Tensor names (no prefix): fc.weight, hidden_norm.weight, norm.weight, layers.i.{input_layernorm,
post_attention_layernorm}.weight, layers.i.self_attn.{q,k,v,o}_proj.weight, layers.i.self_attn.{q,k}_norm.weight,
layers.i.mlp.{gate,up,down}_proj.weight.
"""
import json
import os

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Rotary(nn.Module):
    def __init__(self, head_dim, theta):
        super().__init__()
        inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        self.register_buffer("inv_freq", inv.float(), persistent=False)

    def forward(self, positions):
        """positions [..., T] (long) -> cos, sin [..., T, head_dim] in fp32."""
        freqs = positions.float()[..., None] * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


def apply_rope(x, cos, sin):
    """x [b, h, T, d]; cos/sin [T, d] or [b, T, d]."""
    if cos.dim() == 3:
        cos, sin = cos[:, None], sin[:, None]
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return x * cos + rotate_half(x) * sin


def attention(q, k, v, mask):
    """q [b, nh, Q, d]; k, v [b, nkv, K, d]; mask None or bool [b or 1, 1, Q, K] (True = visible)."""
    rep = q.shape[1] // k.shape[1]
    if rep > 1:
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
    scale = q.shape[-1] ** -0.5
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    scores = (q.float() @ k.float().transpose(-1, -2)) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return (scores.softmax(-1) @ v.float()).to(q.dtype)


class Attention(nn.Module):
    def __init__(self, hidden, heads, kv_heads, head_dim, eps):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)
        self.q_norm = RMSNorm(head_dim, eps)
        self.k_norm = RMSNorm(head_dim, eps)

    def kv(self, x, cos, sin):
        """K (k_norm, RoPE) and V of rows x [b, T, H] at the positions of cos/sin -> [b, nkv, T, d] each."""
        b, t, _ = x.shape
        k = self.k_norm(self.k_proj(x).view(b, t, self.kv_heads, self.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        return apply_rope(k, cos, sin), v

    def forward(self, u, ctx_k, ctx_v, cos, sin, mask):
        b, t, _ = u.shape
        q = self.q_norm(self.q_proj(u).view(b, t, self.heads, self.head_dim)).transpose(1, 2)
        q = apply_rope(q, cos, sin)
        bk, bv = self.kv(u, cos, sin)
        if ctx_k is not None:
            if ctx_k.shape[0] != b:
                ctx_k, ctx_v = ctx_k.expand(b, -1, -1, -1), ctx_v.expand(b, -1, -1, -1)
            bk, bv = torch.cat([ctx_k, bk], dim=2), torch.cat([ctx_v, bv], dim=2)
        out = attention(q, bk, bv, mask)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = Attention(c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"],
                                   c["head_dim"], c["rms_norm_eps"])
        self.mlp = MLP(c["hidden_size"], c["intermediate_size"])
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])

    def forward(self, z, ctx_k, ctx_v, cos, sin, mask):
        z = z + self.self_attn(self.input_layernorm(z), ctx_k, ctx_v, cos, sin, mask)
        return z + self.mlp(self.post_attention_layernorm(z))


def rope_theta_of(config):
    rp = config.get("rope_parameters") or {}
    return float(rp.get("rope_theta", config.get("rope_theta", 10000.0)))


class DraftCache:
    """Per-layer context K/V (after k_norm and RoPE) of the committed positions 0 .. length-1."""

    def __init__(self, n_layers):
        self.k = [None] * n_layers
        self.v = [None] * n_layers
        self.length = 0


class DFlashDrafter(nn.Module):
    def __init__(self, config):
        super().__init__()
        c = dict(config)
        self.config = c
        dc = c["dflash_config"]
        self.target_layer_ids = list(dc["target_layer_ids"])
        self.mask_token_id = int(dc["mask_token_id"])
        self.block_size = int(dc.get("block_size", c.get("block_size", 16)))
        h = c["hidden_size"]
        self.layers = nn.ModuleList([DecoderLayer(c) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(h, c["rms_norm_eps"])
        self.fc = nn.Linear(len(self.target_layer_ids) * h, h, bias=False)
        self.hidden_norm = RMSNorm(h, c["rms_norm_eps"])
        self.rotary = Rotary(c["head_dim"], rope_theta_of(c))
        self.reset_parameters(c.get("initializer_range", 0.02))

    def reset_parameters(self, std):
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0.0, std=std)
            elif isinstance(m, RMSNorm):
                nn.init.ones_(m.weight)

    def context(self, feats):
        """feats [b, T, K*H] (target layer outputs, concatenated in target_layer_ids order) -> c [b, T, H]."""
        if not torch.is_autocast_enabled():
            feats = feats.to(self.fc.weight.dtype)
        return self.hidden_norm(self.fc(feats))

    # ---- training -------------------------------------------------------------------------------------
    def forward_train(self, feats, noise_emb, anchors):
        """Packed forward. feats [b, S, K*H] context features of positions 0..S-1; noise_emb [b, N*B, H] the
        embedded blocks [x_a, m, ..., m] of the N anchors; anchors [b, N] (positions a). Returns the normed
        hidden states [b, N*B, H]. Block n sees context rows j < a_n and the B rows of block n only."""
        b, s, _ = feats.shape
        n = anchors.shape[1]
        bs = self.block_size
        dev = feats.device
        c = self.context(feats)
        cos_c, sin_c = self.rotary(torch.arange(s, device=dev))
        blk_pos = (anchors[:, :, None] + torch.arange(bs, device=dev)).reshape(b, n * bs)
        cos_q, sin_q = self.rotary(blk_pos)
        mask = block_mask(anchors, s, bs)
        z = noise_emb
        for layer in self.layers:
            ck, cv = layer.self_attn.kv(c, cos_c, sin_c)
            z = layer(z, ck, cv, cos_q, sin_q, mask)
        return self.norm(z)

    # ---- inference ------------------------------------------------------------------------------------
    def new_cache(self):
        return DraftCache(len(self.layers))

    @torch.no_grad()
    def append_context(self, cache, feats):
        """Projects the context rows feats [1, T, K*H] of positions cache.length .. cache.length+T-1 and
        appends their K/V to every layer's cache (they are never removed)."""
        t = feats.shape[1]
        if t == 0:
            return
        c = self.context(feats)
        cos, sin = self.rotary(torch.arange(cache.length, cache.length + t, device=feats.device))
        for i, layer in enumerate(self.layers):
            k, v = layer.self_attn.kv(c, cos, sin)
            cache.k[i] = k if cache.k[i] is None else torch.cat([cache.k[i], k], dim=2)
            cache.v[i] = v if cache.v[i] is None else torch.cat([cache.v[i], v], dim=2)
        cache.length += t

    @torch.no_grad()
    def draft(self, cache, noise_emb, start):
        """Runs the block noise_emb [1, B, H] at positions start .. start+B-1 over the whole cached context
        (no mask); the block K/V are not kept. Returns normed hidden states [1, B, H]."""
        assert cache.length == start, (cache.length, start)   # docs/DFLASH.md §5 invariant
        bsz = noise_emb.shape[1]
        cos, sin = self.rotary(torch.arange(start, start + bsz, device=noise_emb.device))
        z = noise_emb
        for i, layer in enumerate(self.layers):
            z = layer(z, cache.k[i], cache.v[i], cos, sin, None)
        return self.norm(z)


def block_mask(anchors, ctx_len, block_size):
    """bool [b, 1, N*B, ctx_len + N*B]: query row of block n sees context j < a_n and the rows of block n."""
    b, n = anchors.shape
    dev = anchors.device
    ctx_vis = torch.arange(ctx_len, device=dev)[None, None, :] < anchors[:, :, None]          # [b, N, S]
    ctx_vis = ctx_vis.repeat_interleave(block_size, dim=1)                                     # [b, NB, S]
    blk = torch.arange(n * block_size, device=dev) // block_size
    blk_vis = (blk[:, None] == blk[None, :]).expand(b, -1, -1)                                 # [b, NB, NB]
    return torch.cat([ctx_vis, blk_vis], dim=-1)[:, None]


# ---- checkpoint format -------------------------------------------------------------------------------

def drafter_config(*, hidden, intermediate, layers, heads, kv_heads, head_dim, vocab_size, mask_token_id,
                   target_layer_ids, num_target_layers, block_size=16, rope_theta=1e7, max_positions=8192,
                   rms_norm_eps=1e-6, initializer_range=0.02):
    """config.json of a z-lab DFlash drafter (docs/DFLASH.md §2.1; key set of transformers' Qwen3Config)."""
    try:
        import transformers
        version = transformers.__version__
    except ImportError:
        version = None
    cfg = {
        "architectures": ["DFlashDraftModel"],
        "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
        "attention_bias": False,
        "attention_dropout": 0.0,
        "block_size": block_size,
        "bos_token_id": None,
        "dflash_config": {"mask_token_id": mask_token_id, "target_layer_ids": list(target_layer_ids)},
        "dtype": "bfloat16",
        "eos_token_id": None,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": initializer_range,
        "intermediate_size": intermediate,
        "layer_types": ["full_attention"] * layers,
        "max_position_embeddings": max_positions,
        "max_window_layers": layers,
        "model_type": "qwen3",
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv_heads,
        "num_target_layers": num_target_layers,
        "pad_token_id": None,
        "rms_norm_eps": rms_norm_eps,
        "rope_parameters": {"rope_theta": float(rope_theta), "rope_type": "default"},
        "rope_theta": float(rope_theta),
        "sliding_window": None,
        "tie_word_embeddings": False,
        "transformers_version": version,
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": vocab_size,
    }
    return cfg


def _save_file(state, path, metadata):
    try:
        from safetensors.torch import save_file
    except ImportError:   # minimal writer of the same format (CPU tests without the safetensors package)
        import struct
        header, blobs, off = {"__metadata__": metadata}, [], 0
        for k in sorted(state):
            t = state[k]
            assert t.dtype == torch.bfloat16
            raw = t.contiguous().view(torch.int16).numpy().tobytes()
            header[k] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
            blobs.append(raw)
            off += len(raw)
        h = json.dumps(header, separators=(",", ":")).encode()
        h += b" " * (-len(h) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
        return
    save_file(state, path, metadata=metadata)


def _load_file(path):
    try:
        from safetensors.torch import load_file
    except ImportError:
        import struct
        import numpy as np
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            data = f.read()
        out = {}
        for k, v in header.items():
            if k == "__metadata__":
                continue
            assert v["dtype"] == "BF16"
            a, b = v["data_offsets"]
            arr = np.frombuffer(data[a:b], dtype=np.int16).copy()
            out[k] = torch.from_numpy(arr).view(torch.bfloat16).reshape(v["shape"])
        return out
    return load_file(path)


def save_drafter(model, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(model.config, f, indent=2)
        f.write("\n")
    state = {k: v.detach().to(torch.bfloat16).contiguous().cpu() for k, v in model.state_dict().items()}
    _save_file(state, os.path.join(out_dir, "model.safetensors"), {"format": "pt"})
    return sorted(state)


def load_drafter(path, device="cpu", dtype=torch.float32):
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    model = DFlashDrafter(cfg)
    state = _load_file(os.path.join(path, "model.safetensors"))
    state = {k[len("model."):] if k.startswith("model.") else k: v for k, v in state.items()}
    model.load_state_dict(state, strict=True)
    return model.to(device=device, dtype=dtype).eval()


def expected_tensor_names(n_layers):
    names = ["fc.weight", "hidden_norm.weight", "norm.weight"]
    for i in range(n_layers):
        p = f"layers.{i}."
        names += [p + "input_layernorm.weight", p + "post_attention_layernorm.weight"]
        names += [p + f"self_attn.{x}_proj.weight" for x in "qkvo"]
        names += [p + "self_attn.q_norm.weight", p + "self_attn.k_norm.weight"]
        names += [p + f"mlp.{x}_proj.weight" for x in ("gate", "up", "down")]
    return sorted(names)


# ---- self-test ---------------------------------------------------------------------------------------

def selftest(device="cpu", seed=0):
    """Packed training forward == per-anchor inference (cached context, incremental appends); tensor names."""
    g = torch.Generator().manual_seed(seed)
    cfg = drafter_config(hidden=64, intermediate=96, layers=2, heads=4, kv_heads=2, head_dim=16, vocab_size=97,
                         mask_token_id=96, target_layer_ids=[1, 3, 5], num_target_layers=8, block_size=8,
                         rope_theta=1e4)
    torch.manual_seed(seed)
    model = DFlashDrafter(cfg).to(device).float().eval()
    with torch.no_grad():
        for p in model.parameters():        # norms away from 1 so that every weight matters
            p.add_(torch.randn(p.shape, generator=g).to(device) * 0.05)
    assert sorted(model.state_dict()) == expected_tensor_names(2), sorted(model.state_dict())
    b, s, bs = 2, 40, cfg["block_size"]
    feats = torch.randn(b, s, 3 * 64, generator=g).to(device)
    anchors = torch.tensor([[5, 6, 20, 31], [1, 12, 13, 32]], device=device)
    emb = torch.randn(97, 64, generator=g).to(device)
    tokens = torch.randint(0, 96, (b, s + bs), generator=g).to(device)
    block_ids = []
    for bi in range(b):
        rows = []
        for a in anchors[bi].tolist():
            blk = torch.full((bs,), 96, device=device)
            blk[0] = tokens[bi, a]
            rows.append(blk)
        block_ids.append(torch.cat(rows))
    block_ids = torch.stack(block_ids)
    with torch.no_grad():
        packed = model.forward_train(feats, emb[block_ids], anchors)
        worst = 0.0
        for bi in range(b):
            for ni, a in enumerate(anchors[bi].tolist()):
                cache = model.new_cache()
                cut = a // 2
                model.append_context(cache, feats[bi:bi + 1, :cut])      # two appends: incremental == at once
                model.append_context(cache, feats[bi:bi + 1, cut:a])
                one = model.draft(cache, emb[block_ids[bi:bi + 1, ni * bs:(ni + 1) * bs]], a)
                ref = packed[bi:bi + 1, ni * bs:(ni + 1) * bs]
                worst = max(worst, (one - ref).abs().max().item())
    assert worst < 1e-4, worst
    return worst


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    if a.selftest:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        print(f"dflash_model selftest ({a.device}): packed == per-anchor, max |diff| "
              f"{selftest(a.device):.2e}: ok", flush=True)
