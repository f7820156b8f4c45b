#!/usr/bin/env python3
"""Quantises a bf16 / f16 / f32 safetensors checkpoint to Qwen's block-128 FP8 format (docs/MODELS.md §6).

  python3 tools/quantize_fp8.py IN_DIR OUT_DIR

Every Linear weight of a Qwen3 / Qwen3.5 checkpoint — a 2-D `*_proj.weight` other than DeltaNet's
in_proj_a / in_proj_b, and a DFlash drafter's `fc.weight` (architectures DFlashDraftModel) — becomes `X.weight` F8_E4M3 [out, in] plus `X.weight_scale_inv` F32
[ceil(out/128), ceil(in/128)], the multiplier: W ≈ e4m3(weight) × scale per 128×128 block (the last block
of a row or column is ragged when a dimension is not a multiple of 128). Per block:
  scale = f32(absmax / 448)   (448 = e4m3's largest finite value; scale 1 for an all-zero block)
  code  = e4m3 of f32(w / scale), rounded to nearest even, saturating at ±448
which is what a float32 implementation (w.float() / scale, then .to(float8_e4m3fn)) computes. Scales are
stored as F32. Everything else (embeddings, lm_head, norms, in_proj_a/b, conv1d, A_log, dt_bias, ...) is
copied byte for byte in its own dtype. config.json gets
  "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                          "weight_block_size": [128, 128], "modules_to_not_convert": [...]}
Every other file of IN_DIR (tokenizer, generation_config, ...) is copied; a sharded checkpoint keeps its
shards and model.safetensors.index.json is rewritten with the scales added.

Plain python3 only (no torch, no numpy): headers parsed with json + struct, tensors streamed one at a time
(memory stays at a few times the largest tensor), f32 -> e4m3 through a 2^17-entry table keyed by the top 16
bits of the f32 quotient plus whether its low 16 bits are non-zero — exact round-to-nearest-even, checked
against a direct nearest-value search and core/dtype.cpp's rule by tests/tools/test_quantize_fp8.py.
"""
import array
import json
import os
import shutil
import struct
import sys

BLOCK = 128
E4M3_MAX = 448.0
# Linear modules left in bf16 however they are named (Qwen's FP8 releases keep these).
NOT_CONVERTED = ["lm_head", "embed_tokens", "in_proj_a", "in_proj_b"]
FLOAT_DTYPES = {"BF16": 2, "F16": 2, "F32": 4}
DTYPE_SIZES = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
               "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}

if sys.byteorder != "little":
    raise SystemExit("quantize_fp8.py: needs a little-endian machine (safetensors data is little-endian)")


class QuantizeError(Exception):
    pass


# ---- e4m3 (OCP "fn": bias 7, no infinities, 0x7F / 0xFF NaN, max 448) -----------------------------------

def e4m3_to_float(code):
    """The value of an e4m3 code, as core/dtype.cpp's e4m3_to_f32 computes it (NaN for 0x7F / 0xFF)."""
    sign = -1.0 if code & 0x80 else 1.0
    exp = (code >> 3) & 0xF
    mant = code & 0x7
    if exp == 0xF and mant == 0x7:
        return float("nan")
    if exp == 0:
        return sign * mant * 2.0 ** -9
    return sign * (1.0 + mant / 8.0) * 2.0 ** (exp - 7)


_POSITIVE = [e4m3_to_float(c) for c in range(0x7F)]  # codes 0x00..0x7E, increasing


def float_to_e4m3(x):
    """Reference encoder, the rule of core/dtype.cpp's f32_to_e4m3: NaN -> 0x7F; |x| >= 448 saturates to
    ±448; otherwise the nearest of the 127 non-negative values, ties to the even code. Exact (the
    comparisons are on doubles, in which every e4m3 value and every midpoint is exact)."""
    if x != x:
        return 0x7F
    sign = 0x80 if (x < 0 or (x == 0 and struct.pack("<d", x)[7] & 0x80)) else 0x00
    a = abs(x)
    if a >= E4M3_MAX:
        return sign | 0x7E
    lo, hi = 0, 0x7E  # binary search: _POSITIVE[lo] <= a < _POSITIVE[hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _POSITIVE[mid] <= a:
            lo = mid
        else:
            hi = mid
    d_lo, d_hi = a - _POSITIVE[lo], _POSITIVE[hi] - a
    if d_lo < d_hi or (d_lo == d_hi and lo % 2 == 0):
        return sign | lo
    return sign | hi


def f32_from_bits(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def build_f32_table():
    """bytes of 2^17 codes: index (bits >> 16) | (0x10000 if bits & 0xFFFF else 0) of an f32's bits. The
    low half of the f32 only matters as a sticky bit (e4m3 keeps at most 3 of f32's 23 mantissa bits and
    rounds at bit 19 or above), so the smallest f32 with those top bits and a non-zero low half stands for
    all of them."""
    table = bytearray(1 << 17)
    for top in range(1 << 16):
        base = top << 16
        table[top] = float_to_e4m3(f32_from_bits(base))
        table[top | 0x10000] = float_to_e4m3(f32_from_bits(base | 1))
    return bytes(table)


def encode_f32_bits(words, table):
    """e4m3 codes (bytes) of an array('I') of f32 bit patterns."""
    return bytes([table[(w >> 16) | (0x10000 if w & 0xFFFF else 0)] for w in words])


# ---- safetensors --------------------------------------------------------------------------------------

def read_header(path):
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise QuantizeError(f"{path}: shorter than a safetensors header")
        (n,) = struct.unpack("<Q", raw)
        if n > 100_000_000:
            raise QuantizeError(f"{path}: header length {n} is implausible")
        try:
            header = json.loads(f.read(n))
        except ValueError as e:
            raise QuantizeError(f"{path}: header is not JSON ({e})") from e
    if not isinstance(header, dict):
        raise QuantizeError(f"{path}: header is not a JSON object")
    size = os.path.getsize(path)
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError) as e:
            raise QuantizeError(f"{path}: tensor {name!r} has a malformed entry") from e
        if dtype not in DTYPE_SIZES:
            raise QuantizeError(f"{path}: tensor {name!r} has dtype {dtype!r}, which this script does not know")
        numel = 1
        for d in shape:
            numel *= d
        if end - begin != numel * DTYPE_SIZES[dtype] or 8 + n + end > size:
            raise QuantizeError(f"{path}: tensor {name!r}: data offsets do not match its shape and dtype")
    return header, 8 + n


def to_f32_array(raw, dtype):
    """array('f') of a BF16 / F16 / F32 tensor's bytes."""
    out = array.array("f")
    if dtype == "F32":
        out.frombytes(raw)
    elif dtype == "BF16":
        wide = bytearray(len(raw) * 2)  # each bf16 is the high half of an f32
        wide[2::4] = raw[0::2]
        wide[3::4] = raw[1::2]
        out.frombytes(bytes(wide))
    else:  # F16
        half = array.array("e")
        half.frombytes(raw)
        out.extend(half)
    return out


def should_quantize(name, info, drafter=False):
    if info["dtype"] not in FLOAT_DTYPES or len(info["shape"]) != 2 or not name.endswith(".weight"):
        return False
    if drafter and name in ("fc.weight", "model.fc.weight"):
        return True  # the drafter's projection of the target's features, a Linear like the layers'
    module = name[: -len(".weight")].rsplit(".", 1)[-1]
    return module.endswith("_proj") and module not in NOT_CONVERTED


def is_drafter(config):
    return "DFlashDraftModel" in config.get("architectures", [])


def quantize_tensor(raw, dtype, rows, cols, table):
    """(codes bytes [rows*cols], scales array('f') [ceil(rows/128) * ceil(cols/128)])."""
    w = to_f32_array(raw, dtype)
    nbr, nbc = -(-rows // BLOCK), -(-cols // BLOCK)
    scales = array.array("f", bytes(4 * nbr * nbc))
    codes = bytearray(rows * cols)
    for br in range(nbr):
        r0, r1 = br * BLOCK, min(rows, (br + 1) * BLOCK)
        row_scales = []
        for bc in range(nbc):
            c0, c1 = bc * BLOCK, min(cols, (bc + 1) * BLOCK)
            amax = 0.0
            for r in range(r0, r1):
                m = max(map(abs, w[r * cols + c0: r * cols + c1]))
                if m > amax:
                    amax = m
            if amax != amax or amax == float("inf"):
                raise QuantizeError(f"block ({br}, {bc}) holds a NaN or an infinity")
            s = struct.unpack("<f", struct.pack("<f", amax / E4M3_MAX))[0] if amax > 0 else 1.0
            if s == 0.0:
                s = 1.0  # absmax below 448 × f32's smallest subnormal: every code is 0 anyway
            scales[br * nbc + bc] = s
            row_scales.extend([s] * (c1 - c0))
        for r in range(r0, r1):
            # float division of two f32 values rounded once to f32: the double quotient has enough bits that
            # rounding it to f32 gives the correctly rounded f32 quotient.
            q = array.array("f", [x / s for x, s in zip(w[r * cols: (r + 1) * cols], row_scales)])
            bits = array.array("I")
            bits.frombytes(q.tobytes())
            codes[r * cols: (r + 1) * cols] = encode_f32_bits(bits, table)
    return bytes(codes), scales


def quantize_file(src, dst, table, log, drafter=False):
    """Writes the quantised copy of safetensors file src to dst. Returns (names written, fp8 count)."""
    header, data_start = read_header(src)
    names = [n for n in header if n != "__metadata__"]
    names.sort(key=lambda n: header[n]["data_offsets"][0])
    plan, out_header, offset = [], {}, 0
    if "__metadata__" in header:
        out_header["__metadata__"] = header["__metadata__"]
    for name in names:
        info = header[name]
        if name.endswith("_scale_inv") or info["dtype"] in ("F8_E4M3", "F8_E5M2"):
            raise QuantizeError(f"{src}: tensor {name!r} is already quantised")
        begin, end = info["data_offsets"]
        if should_quantize(name, info, drafter):
            rows, cols = info["shape"]
            nscale = -(-rows // BLOCK) * -(-cols // BLOCK)
            out_header[name] = {"dtype": "F8_E4M3", "shape": [rows, cols],
                                "data_offsets": [offset, offset + rows * cols]}
            offset += rows * cols
            sname = name + "_scale_inv"
            if sname in header:
                raise QuantizeError(f"{src}: {sname!r} exists already")
            out_header[sname] = {"dtype": "F32", "shape": [-(-rows // BLOCK), -(-cols // BLOCK)],
                                 "data_offsets": [offset, offset + 4 * nscale]}
            offset += 4 * nscale
            plan.append((name, True, begin, end))
        else:
            out_header[name] = {"dtype": info["dtype"], "shape": info["shape"],
                                "data_offsets": [offset, offset + end - begin]}
            offset += end - begin
            plan.append((name, False, begin, end))
    blob = json.dumps(out_header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    fp8 = 0
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        fout.write(struct.pack("<Q", len(blob)))
        fout.write(blob)
        for name, quantize, begin, end in plan:
            fin.seek(data_start + begin)
            raw = fin.read(end - begin)
            if not quantize:
                fout.write(raw)
                continue
            rows, cols = header[name]["shape"]
            try:
                codes, scales = quantize_tensor(raw, header[name]["dtype"], rows, cols, table)
            except QuantizeError as e:
                raise QuantizeError(f"{src}: tensor {name!r}: {e}") from e
            fout.write(codes)
            fout.write(scales.tobytes())
            fp8 += 1
            log(f"  {name} [{rows}, {cols}] -> F8_E4M3 + {len(scales)} F32 scales")
    return [n for n in out_header if n != "__metadata__"], fp8


def quantize_checkpoint(in_dir, out_dir, log=print):
    if not os.path.isfile(os.path.join(in_dir, "config.json")):
        raise QuantizeError(f"{in_dir}: no config.json")
    if os.path.abspath(in_dir) == os.path.abspath(out_dir):
        raise QuantizeError("IN_DIR and OUT_DIR must differ")
    shards = sorted(f for f in os.listdir(in_dir) if f.endswith(".safetensors"))
    if not shards:
        raise QuantizeError(f"{in_dir}: no .safetensors files")
    with open(os.path.join(in_dir, "config.json")) as f:
        try:
            config = json.load(f)
        except ValueError as e:
            raise QuantizeError(f"{in_dir}/config.json is not JSON ({e})") from e
    for key in ("quantization_config", "compression_config"):
        if key in config or key in config.get("text_config", {}):
            raise QuantizeError(f"{in_dir}/config.json declares {key}: the checkpoint is quantised already")
    os.makedirs(out_dir, exist_ok=True)
    table = build_f32_table()
    weight_map, total = {}, 0
    for shard in shards:
        log(f"{shard}:")
        names, fp8 = quantize_file(os.path.join(in_dir, shard), os.path.join(out_dir, shard), table, log,
                                   is_drafter(config))
        for n in names:
            weight_map[n] = shard
        total += fp8
    if total == 0:
        raise QuantizeError(f"{in_dir}: no Linear weight (2-D bf16/f16/f32 *_proj.weight) to quantise")
    for fn in sorted(os.listdir(in_dir)):
        path = os.path.join(in_dir, fn)
        if fn.endswith(".safetensors") or fn in ("config.json", "model.safetensors.index.json"):
            continue
        if not os.path.isfile(path):
            continue
        shutil.copyfile(path, os.path.join(out_dir, fn))
    index_path = os.path.join(in_dir, "model.safetensors.index.json")
    if os.path.isfile(index_path):
        with open(index_path) as f:
            index = json.load(f)
        index["weight_map"] = dict(sorted(weight_map.items()))
        index.setdefault("metadata", {})["total_size"] = sum(
            os.path.getsize(os.path.join(out_dir, s)) for s in shards)
        with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f, indent=2)
            f.write("\n")
    config["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                     "weight_block_size": [BLOCK, BLOCK], "modules_to_not_convert": NOT_CONVERTED}
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    log(f"{total} Linear weights quantised to F8_E4M3 (block 128, F32 scales) in {out_dir}")
    return total


def main(argv):
    if len(argv) != 3 or argv[1].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        print("usage: quantize_fp8.py IN_DIR OUT_DIR", file=sys.stderr)
        return 2
    try:
        quantize_checkpoint(argv[1], argv[2])
    except (QuantizeError, OSError) as e:
        print(f"quantize_fp8.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
