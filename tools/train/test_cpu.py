#!/usr/bin/env python3
"""CPU tests of the pipeline's own logic (no GPU, no transformers, no tokenizers needed).

  python3 tools/train/test_cpu.py            pure-Python parts (layer-id rule, loss weights, split, corpus)
  python3 tools/train/test_cpu.py --torch    also: drafter self-test (packed == per-anchor), and the drafter
                                             training and tau-evaluation stages end to end against a small
                                             fake causal target with the HF call interface (torch needed; e.g.
                                             Debian's python3-torch: /usr/bin/python3)
"""
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import common  # noqa: E402


def quiet():
    import contextlib
    return contextlib.redirect_stdout(open(os.devnull, "w"))


def test_pure():
    assert common.build_target_layer_ids(36, 5) == [1, 9, 17, 25, 33]
    assert common.build_target_layer_ids(64, 5) == [1, 16, 31, 46, 61]
    assert common.build_target_layer_ids(40, 5) == [1, 10, 19, 28, 37]
    assert common.build_target_layer_ids(32, 5) == [1, 8, 15, 22, 29]
    assert common.build_target_layer_ids(32, 8) == [1, 5, 9, 13, 17, 21, 25, 29]
    assert common.build_target_layer_ids(8, 3) == [1, 3, 5]
    assert common.build_target_layer_ids(8, 1) == [4]
    assert common.default_num_taps(8) == 3 and common.default_num_taps(36) == 5 and common.default_num_taps(4) == 1
    w = common.loss_weights(16, 7.0)
    assert len(w) == 16 and w[0] == 0.0 and w[1] == 1.0 and abs(w[15] - math.exp(-2.0)) < 1e-12
    assert common.round_up(8192, 64) == 8192 and common.round_up(1025, 64) == 1088
    d = common.sha256_text("x = 1\n")
    assert common.split_of(d, 1000) == "val" and common.split_of(d, 0) == "train"
    assert common.split_of(d, 20) == common.split_of(d, 20)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        os.makedirs(os.path.join(src, "pkg"))
        body = "def f(x):\n    return x + 1\n" * 20
        files = {"a.py": body, "pkg/b.py": body, "pkg/c.py": "x = 1\n" * 200, "small.py": "x=1\n",
                 "bin.py": "x = '\udcff'\n" * 100, "tok.py": "s = '<|endoftext|>'\n" * 50}
        for name, text in files.items():
            with open(os.path.join(src, name), "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(text)
        out = os.path.join(tmp, "corpus")
        subprocess.run([sys.executable, os.path.join(HERE, "corpus.py"), "--out", out, "--roots", src,
                        "--val-permille", "500"], check=True, capture_output=True)
        stats = common.read_json(os.path.join(out, "stats.json"))
        kept = stats["kept"]["train"]["files"] + stats["kept"]["val"]["files"]
        assert kept == 2 and stats["duplicates"] == 1, stats
        assert stats["dropped"] == {"too_small": 1, "not_utf8": 1, "special_token": 1}, stats["dropped"]
        man = common.read_json(os.path.join(out, "manifest.json"))
        for rec in man["files"]:
            assert rec["split"] == common.split_of(rec["sha256"], 500)
    print("pure tests: ok")


def test_torch():
    import numpy as np
    import torch
    from torch import nn
    from types import SimpleNamespace
    import dflash_model as dm
    import targetlib as tl

    print("selftest max diff", dm.selftest())

    class Cache:
        def __init__(self):
            self.ids = None

    class FakeLayer(nn.Module):
        def __init__(self, h):
            super().__init__()
            self.w = nn.Linear(h, h)

        def forward(self, x):
            mean = x.cumsum(1) / torch.arange(1, x.shape[1] + 1)[None, :, None]
            return x + torch.tanh(self.w(mean))

    class Inner(nn.Module):
        def __init__(self, v, h, n):
            super().__init__()
            self.embed_tokens = nn.Embedding(v, h)
            self.layers = nn.ModuleList([FakeLayer(h) for _ in range(n)])

        def forward(self, input_ids, output_hidden_states=False, use_cache=False, **_):
            x = self.embed_tokens(input_ids)
            hs = [x]
            for layer in self.layers:
                x = layer(x)
                hs.append(x)
            hs[-1] = hs[-1] / hs[-1].norm(dim=-1, keepdim=True)   # like HF: the last entry is post-norm
            return SimpleNamespace(hidden_states=tuple(hs), last_hidden_state=hs[-1])

    class FakeTarget(nn.Module):
        """Causal; recomputes from its cache of ids (so deepcopy + replay behave like an HF cache)."""

        def __init__(self, v=320, h=32, n=8):
            super().__init__()
            self.model = Inner(v, h, n)
            self.lm_head = nn.Linear(h, v, bias=False)
            self.config = SimpleNamespace(num_hidden_layers=n, hidden_size=h, num_attention_heads=2,
                                          num_key_value_heads=1, head_dim=16, vocab_size=v,
                                          rope_parameters={"rope_theta": 1e7}, max_position_embeddings=4096,
                                          rms_norm_eps=1e-6)

        def get_input_embeddings(self):
            return self.model.embed_tokens

        def get_output_embeddings(self):
            return self.lm_head

        def forward(self, input_ids, position_ids=None, past_key_values=None, use_cache=False,
                    output_hidden_states=False, logits_to_keep=0):
            full = input_ids if past_key_values is None or past_key_values.ids is None else \
                torch.cat([past_key_values.ids, input_ids], 1)
            if position_ids is not None:
                assert position_ids[0, 0].item() == full.shape[1] - input_ids.shape[1]
            out = self.model(full)
            t = input_ids.shape[1]
            hs = tuple(h[:, -t:] for h in out.hidden_states)
            cache = past_key_values if past_key_values is not None else Cache()
            if use_cache:
                cache.ids = full
            logits = self.lm_head(hs[-1] * 8)
            if logits_to_keep:
                logits = logits[:, -logits_to_keep:]
            return SimpleNamespace(logits=logits, hidden_states=hs if output_hidden_states else None,
                                   past_key_values=cache)

    torch.manual_seed(0)
    fake = FakeTarget().eval()
    for p in fake.parameters():
        p.requires_grad_(False)
    with tempfile.TemporaryDirectory() as tmp:
        tdir, ddir = os.path.join(tmp, "target"), os.path.join(tmp, "data")
        os.makedirs(tdir)
        os.makedirs(ddir)
        vocab = {f"t{i}": i for i in range(296)}
        added = [{"id": 296 + i, "content": t} for i, t in enumerate(common.SPECIAL_TOKENS)]
        with open(os.path.join(tdir, "tokenizer.json"), "w") as f:
            json.dump({"added_tokens": added, "model": {"vocab": vocab}}, f)
        rng = np.random.RandomState(0)
        for split, n_docs in (("train", 60), ("val", 20)):
            chunks, docs, pos = [], [], 0
            for _ in range(n_docs):
                n = int(rng.randint(150, 400))
                chunks.append(np.concatenate([rng.randint(0, 296, n), [296]]).astype(np.uint16))
                docs.append((pos, pos + n))
                pos += n + 1
            np.concatenate(chunks).tofile(os.path.join(ddir, f"{split}.bin"))
            np.save(os.path.join(ddir, f"{split}_docs.npy"), np.asarray(docs, dtype=np.int64))
        tl.load_target = lambda path, device, dtype=torch.float32: fake
        tl.decode_ids = lambda target_dir, ids: " ".join(map(str, ids))
        import train_drafter
        import eval_tau
        dout = os.path.join(tmp, "drafter")
        sys.argv = ["train_drafter.py", "--target", tdir, "--data", ddir, "--out", dout, "--layers", "1",
                    "--intermediate", "48", "--prompt-lens", "16,32", "--gen-len", "48", "--num-seqs", "64",
                    "--gen-batch", "32", "--val-seqs", "8", "--batch", "8", "--anchors", "8", "--steps", "30",
                    "--eval-every", "15", "--log-every", "10", "--warmup-steps", "5"]
        with quiet():
            train_drafter.main()
        cfg = common.read_json(os.path.join(dout, "config.json"))
        assert cfg["dflash_config"] == {"mask_token_id": 299, "target_layer_ids": [1, 3, 5]}, cfg
        assert cfg["num_target_layers"] == 8 and cfg["block_size"] == 16
        logs = [json.loads(line) for line in open(os.path.join(dout, "train_log.jsonl"))]
        assert any(r["event"] == "saved" for r in logs)
        rep = os.path.join(tmp, "eval.json")
        sys.argv = ["eval_tau.py", "--target", tdir, "--drafter", dout, "--data", ddir, "--out", rep,
                    "--num-prompts", "4", "--prompt-len", "16", "--max-new", "40", "--check-greedy", "4"]
        with quiet():
            eval_tau.main()
        r = common.read_json(rep)["results"]
        g = r["T=0"]["greedy_check"]
        assert g["identical"] == g["checked"] == 4, g     # the fake target is exact: spec == greedy
        assert r["T=0"]["tau"] >= 1.0 and r["T=0.7"]["tau"] >= 1.0

        # Control flow with oracle drafts (docs/DFLASH.md §11.2): the first j drafts are the true greedy
        # continuation, the rest garbage -> exactly j accepted per step, output == plain greedy.
        drafter = dm.load_drafter(dout)
        prompt = [int(v) for v in np.fromfile(os.path.join(ddir, "val.bin"), dtype=np.uint16)[:20]]
        ref = eval_tau.plain_greedy(fake, prompt, 400, real_vocab=300, mask_id=299, stop=set())
        for j in (0, 1, 5, 15):
            def oracle(dcache, block, s, j=j):
                assert dcache.length == s
                true = ref[s - len(prompt) + 1:s - len(prompt) + 16]
                d = [t if k < j else (t + 1) % 296 for k, t in enumerate(true)]
                return torch.tensor([d])
            em, acc = eval_tau.speculative(fake, drafter, prompt, 0.0, None, real_vocab=300, stop=set(),
                                           max_new=200, propose=oracle)
            assert em == ref[:200], j
            assert all(a == j for a in acc[:-1]), (j, acc)
    test_target_loop(tmp_root=None)
    print("torch tests: ok")


def test_target_loop(tmp_root=None):
    """train_target.py's loop, schedule, logging and saving, with a stand-in `transformers` module."""
    import types
    import numpy as np
    import torch
    from torch import nn
    from types import SimpleNamespace

    class Cfg:
        def __init__(self, **kw):
            self.__dict__.update(kw)

        def to_dict(self):
            return dict(self.__dict__)

    class LM(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.config = cfg
            self.emb = nn.Embedding(cfg.vocab_size, 16)
            self.head = nn.Linear(16, cfg.vocab_size)

        def forward(self, input_ids, use_cache=False, **_):
            return SimpleNamespace(logits=self.head(self.emb(input_ids)))

        def save_pretrained(self, out, max_shard_size=None, safe_serialization=True):
            assert max_shard_size == "15MB"
            os.makedirs(out, exist_ok=True)
            torch.save((self.config.to_dict(), self.state_dict()), os.path.join(out, "fake.pt"))
            open(os.path.join(out, "model.safetensors"), "wb").write(b"x" * 10)

        @classmethod
        def from_pretrained(cls, path, dtype=None):
            d, st = torch.load(os.path.join(path, "fake.pt"))
            m = cls(Cfg(**d))
            m.load_state_dict(st)
            return m.to(dtype)

    class GenerationConfig:
        def __init__(self, **kw):
            self.kw = kw

        def save_pretrained(self, out):
            common.write_json(os.path.join(out, "generation_config.json"), self.kw)

    fake = types.ModuleType("transformers")
    fake.Qwen3_5TextConfig, fake.Qwen3_5ForCausalLM, fake.GenerationConfig = Cfg, LM, GenerationConfig
    saved = sys.modules.get("transformers")
    sys.modules["transformers"] = fake
    try:
        import train_target
        with tempfile.TemporaryDirectory() as tmp:
            data, tok, out = (os.path.join(tmp, n) for n in ("data", "tok", "out"))
            for d in (data, tok):
                os.makedirs(d)
            rng = np.random.RandomState(0)
            for split in ("train", "val"):
                (np.arange(5000) % 37).astype(np.uint16).tofile(os.path.join(data, f"{split}.bin"))
            common.write_json(os.path.join(data, "meta.json"), {
                "vocab_size": 40, "special_ids": dict(zip(common.SPECIAL_TOKENS, range(36, 40))),
                "splits": {"val": {"bytes_per_token": 3.0}}})
            for n in ("tokenizer.json", "tokenizer_config.json"):
                common.write_json(os.path.join(tok, n), {})
            sys.argv = ["train_target.py", "--data", data, "--tokenizer", tok, "--out", out, "--seq-len", "32",
                        "--batch", "8", "--warmup-steps", "20", "--eval-every", "25", "--eval-batches", "2",
                        "--log-every", "10", "--max-minutes", "0.05", "--reserve-minutes", "0", "--lr", "1e-2"]
            with quiet():
                train_target.main()
            summ = common.read_json(os.path.join(out, "training_summary.json"))
            logs = [json.loads(x) for x in open(os.path.join(out, "train_log.jsonl"))]
            fitted = [r for r in logs if r["event"] == "fitted_steps"]
            assert fitted and summ["steps"] <= fitted[0]["steps"] + 1, (fitted, summ)
            assert summ["saved_val_loss_fp32"] < 2.0, summ    # the cyclic stream is learnable
            assert common.read_json(os.path.join(out, "generation_config.json"))["eos_token_id"] == [38, 36]
            assert rng is not None
    finally:
        if saved is not None:
            sys.modules["transformers"] = saved
        else:
            del sys.modules["transformers"]
    print("target loop test: ok")


if __name__ == "__main__":
    test_pure()
    if "--torch" in sys.argv:
        test_torch()
