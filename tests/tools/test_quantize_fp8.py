"""tools/quantize_fp8.py: the e4m3 encoder against the loader's table, the format it writes, and that
specserve loads the result with kept e4m3 weights giving the dequantised weights' greedy tokens (and a
quantised DFlash drafter, fc included, keeping speculation equal to plain decoding)."""
import array
import importlib.util
import json
import math
import os
import random
import shutil
import struct
import subprocess
import tempfile
import unittest

SOURCE = os.environ.get("SPECSERVE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(SOURCE, "tools", "quantize_fp8.py")
SPECSERVE = os.environ.get("SPECSERVE_BIN", "")
TINY = os.path.join(SOURCE, "tests", "fixtures", "model", "qwen3_5_flat")  # F32, ragged blocks (48, 64, 256)
DEMO = os.path.join(SOURCE, "models", "demo-coder", "target")  # BF16, 4 shards
PAIR = os.path.join(SOURCE, "tests", "fixtures", "dflash", "dense-trained")  # a trained target + drafter pair

spec = importlib.util.spec_from_file_location("quantize_fp8", SCRIPT)
q8 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(q8)


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def cpp_e4m3_to_f32(code):
    """core/dtype.cpp's e4m3_to_f32, transcribed with its own operations (ldexp of the mantissa), so that the
    decoder in the script is checked against the loader's definition rather than against itself."""
    sign = code & 0x80
    exp = (code >> 3) & 0xF
    mant = code & 0x7
    if exp == 0xF and mant == 0x7:
        return float("nan")
    v = math.ldexp(float(mant), -9) if exp == 0 else math.ldexp(1.0 + mant / 8.0, exp - 7)
    return -v if sign else v


def cpp_f32_to_e4m3(x):
    """core/dtype.cpp's f32_to_e4m3: a linear scan of the 127 non-negative codes, f32 arithmetic."""
    if x != x:
        return 0x7F
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    a = abs(f32(x))
    if a >= 448.0:
        return sign | 0x7E
    best, best_err = 0, a
    for c in range(1, 0x7F):
        err = f32(abs(f32(cpp_e4m3_to_f32(c) - a)))
        if err < best_err or (err == best_err and c % 2 == 0 and best % 2 == 1):
            best, best_err = c, err
    return sign | best


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = (info["dtype"], info["shape"], data[b:e])
    return out


def load_dir(path):
    out = {}
    for fn in sorted(os.listdir(path)):
        if fn.endswith(".safetensors"):
            out.update(read_safetensors(os.path.join(path, fn)))
    return out


def run_specserve(*args):
    r = subprocess.run([SPECSERVE, *args], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError(f"specserve {' '.join(args)} failed: {r.stderr[-2000:]}")
    return r.stdout


class Encoder(unittest.TestCase):
    def test_decoder_matches_loader_table(self):
        anchors = {0x00: 0.0, 0x01: 2.0 ** -9, 0x07: 7 * 2.0 ** -9, 0x08: 2.0 ** -6, 0x38: 1.0, 0x7E: 448.0,
                   0xFE: -448.0, 0x80: 0.0, 0xB8: -1.0}
        for code, value in anchors.items():
            self.assertEqual(q8.e4m3_to_float(code), value, hex(code))
        for code in range(256):
            want, got = cpp_e4m3_to_f32(code), q8.e4m3_to_float(code)
            if want != want:
                self.assertIn(code, (0x7F, 0xFF))
                self.assertTrue(got != got, hex(code))
            else:
                self.assertEqual(struct.pack("<f", got), struct.pack("<f", want), hex(code))

    def test_every_code_round_trips(self):
        for code in range(256):
            if code in (0x7F, 0xFF):
                self.assertEqual(q8.float_to_e4m3(q8.e4m3_to_float(code)), 0x7F)
                continue
            self.assertEqual(q8.float_to_e4m3(q8.e4m3_to_float(code)), code, hex(code))

    def test_reference_encoder_matches_cpp_rule(self):
        # Midpoints (the ties), one f32 ulp either side, the saturation edge, and random values.
        values = [0.0, -0.0, 448.0, 449.0, 464.0, -1e9, 2.0 ** -10, 2.0 ** -11, 3 * 2.0 ** -11]
        pos = [cpp_e4m3_to_f32(c) for c in range(0x7F)]
        for lo, hi in zip(pos, pos[1:]):
            mid = (lo + hi) / 2
            values += [mid, -mid, math.nextafter(f32(mid), 0.0), math.nextafter(f32(mid), math.inf)]
        rng = random.Random(7)
        values += [rng.uniform(-500, 500) for _ in range(300)] + [rng.uniform(-0.02, 0.02) for _ in range(300)]
        for v in values:
            v = f32(v)
            self.assertEqual(q8.float_to_e4m3(v), cpp_f32_to_e4m3(v), repr(v))

    def test_table_encoder_matches_reference(self):
        table = q8.build_f32_table()
        pos = [cpp_e4m3_to_f32(c) for c in range(0x7F)]
        values = []
        for lo, hi in zip(pos, pos[1:]):
            mid = f32((lo + hi) / 2)  # every midpoint is exact in f32
            for v in (mid, math.nextafter(mid, 0.0), math.nextafter(mid, math.inf), lo, hi):
                values += [f32(v), -f32(v)]
        rng = random.Random(11)
        bits = [rng.getrandbits(32) for _ in range(20000)]
        bits = [b for b in bits if (b >> 23) & 0xFF != 0xFF]  # no inf / NaN
        values += [struct.unpack("<f", struct.pack("<I", b))[0] for b in bits]
        words = array.array("I", [f32_bits(v) for v in values])
        got = q8.encode_f32_bits(words, table)
        for v, g in zip(values, got):
            self.assertEqual(g, q8.float_to_e4m3(v), repr(v))


class Checkpoint(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="quantize_fp8_")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def quantize(self, src, name):
        out = os.path.join(self.tmp, name)
        if not os.path.isdir(out):
            r = subprocess.run(["python3", SCRIPT, src, out], capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
        return out

    def test_format_and_error_bound(self):
        out = self.quantize(TINY, "tiny")
        with open(os.path.join(out, "config.json")) as f:
            qc = json.load(f)["quantization_config"]
        self.assertEqual({k: qc[k] for k in ("quant_method", "fmt", "activation_scheme", "weight_block_size")},
                         {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                          "weight_block_size": [128, 128]})
        src, dst = load_dir(TINY), load_dir(out)
        quantised = 0
        for name, (dtype, shape, raw) in src.items():
            module = name.rsplit(".", 2)[-2] if name.endswith(".weight") else ""
            linear = len(shape) == 2 and module.endswith("_proj") and module not in ("in_proj_a", "in_proj_b")
            if not linear:
                self.assertEqual(dst[name], (dtype, shape, raw), name)  # kept byte for byte
                self.assertNotIn(name + "_scale_inv", dst)
                continue
            quantised += 1
            wdt, wshape, codes = dst[name]
            sdt, sshape, sraw = dst[name + "_scale_inv"]
            rows, cols = shape
            self.assertEqual((wdt, wshape, sdt, sshape),
                             ("F8_E4M3", shape, "F32", [-(-rows // 128), -(-cols // 128)]), name)
            w = q8.to_f32_array(raw, dtype)
            scales = array.array("f")
            scales.frombytes(sraw)
            nbc = sshape[1]
            for r in range(rows):
                for c in range(cols):
                    s = scales[(r // 128) * nbc + c // 128]
                    deq = q8.e4m3_to_float(codes[r * cols + c]) * s
                    x = w[r * cols + c]
                    # Half an e4m3 step: 2^-4 relative for normals, 2^-10 × scale in the subnormal range.
                    self.assertLessEqual(abs(deq - x), max(abs(x) / 16, s * 2.0 ** -10) * (1 + 1e-6), (name, r, c))
            # The scale is the block's absmax / 448: the largest code of every block is ±448 (0x7E / 0xFE).
            top = {}
            for r in range(rows):
                for c in range(cols):
                    key = (r // 128, c // 128)
                    top[key] = max(top.get(key, 0), codes[r * cols + c] & 0x7F)
            self.assertEqual(set(top.values()), {0x7E}, name)
        self.assertEqual(quantised, 19)

    def test_refuses_quantised_input_and_bad_args(self):
        out = self.quantize(TINY, "tiny")
        r = subprocess.run(["python3", SCRIPT, out, os.path.join(self.tmp, "again")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("quantised already", r.stderr)
        r = subprocess.run(["python3", SCRIPT, TINY], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)

    @unittest.skipUnless(SPECSERVE and os.path.exists(SPECSERVE), "SPECSERVE_BIN not set")
    def test_specserve_loads_and_keep_equals_dequantise(self):
        for src, name, prompt in ((TINY, "tiny", "1,5,9,30,2,77"), (DEMO, "demo", "755,300,1201,44,9,610")):
            out = self.quantize(src, name)
            info = run_specserve("info", "--model", out)
            self.assertRegex(info, r"quantized:\s+fp8 block-128: \d+ tensors", name)
            tokens = {}
            for mode in ("keep", "dequantise"):
                j = json.loads(run_specserve("generate", "--model", out, "--prompt-ids", prompt, "--max-tokens", "24",
                                             "--json", "--backend", "cpu", "--threads", "2", "--fp8-weights", mode))
                tokens[mode] = j["token_ids"]
            self.assertEqual(len(tokens["keep"]), 24, name)
            self.assertEqual(tokens["keep"], tokens["dequantise"], name)

    @unittest.skipUnless(SPECSERVE and os.path.exists(SPECSERVE), "SPECSERVE_BIN not set")
    def test_drafter_fc_too_and_speculation_stays_lossless(self):
        out = self.quantize(os.path.join(PAIR, "draft"), "drafter")
        header, _ = q8.read_header(os.path.join(out, "model.safetensors"))
        fp8 = sorted(n for n in header if n != "__metadata__" and header[n]["dtype"] == "F8_E4M3")
        self.assertIn("fc.weight", fp8)
        self.assertIn("fc.weight_scale_inv", header)
        self.assertTrue(all(n == "fc.weight" or n.endswith("_proj.weight") for n in fp8), fp8)
        target = os.path.join(PAIR, "target")
        with open(os.path.join(PAIR, "trace.json")) as f:
            prompt = ",".join(str(t) for t in json.load(f)["prompt_ids"])  # a prompt the pair drafts well on
        runs = {}
        for draft in (None, out, os.path.join(PAIR, "draft")):
            args = ["generate", "--model", target, "--prompt-ids", prompt, "--max-tokens", "24", "--json", "--backend",
                    "cpu", "--threads", "2"]
            if draft:
                args += ["--draft", draft]
            runs[draft] = json.loads(run_specserve(*args))
        plain = runs[None]["token_ids"]
        self.assertEqual(len(plain), 24)
        for draft in (out, os.path.join(PAIR, "draft")):
            self.assertEqual(runs[draft]["token_ids"], plain, draft)
        # The fp8 drafter drafts (its weights are the bf16 ones up to the quantisation), as the bf16 one does.
        self.assertGreater(runs[out]["stats"]["accepted_total"], 0)
        self.assertGreater(runs[os.path.join(PAIR, "draft")]["stats"]["accepted_total"], 0)


if __name__ == "__main__":
    unittest.main()
