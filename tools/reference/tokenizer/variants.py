"""Tokenizer variants used by the fixtures: each is a transformation of a base tokenizer.json
(as a dict) plus encode options. tests/tokenizer/tokenizer_variants.cpp applies the same
transformations in C++; keep the two in step.
"""
import copy

QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def _split(pattern_kind, pattern, behavior, invert=False):
    return {"type": "Split", "pattern": {pattern_kind: pattern}, "behavior": behavior, "invert": invert}


def _bytelevel(use_regex, add_prefix_space=False):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": False,
            "use_regex": use_regex}


def transform(name, base):
    """Returns (tokenizer_json_dict, encode_special_tokens) for variant `name`."""
    t = copy.deepcopy(base)
    split_special = False
    if name in ("qwen3", "gpt2"):
        pass
    elif name == "qwen35":
        t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = QWEN35_REGEX
    elif name in ("qwen3_split_special", "gpt2_split_special"):
        split_special = True
    elif name == "gpt2_ignore_merges":
        t["model"]["ignore_merges"] = True
    elif name == "gpt2_prefix_space":
        t["pre_tokenizer"]["add_prefix_space"] = True
    elif name == "gpt2_nfkc":
        t["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}]}
    elif name == "gpt2_removed":
        t["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            _split("Regex", r"\s+", "Removed"), _bytelevel(False)]}
    elif name == "gpt2_merged_prev":
        t["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            _split("Regex", r"\s+", "MergedWithPrevious"), _bytelevel(False)]}
    elif name == "gpt2_merged_next":
        t["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            _split("Regex", r"\p{N}", "MergedWithNext"), _bytelevel(True)]}
    elif name == "gpt2_contiguous_invert":
        t["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            _split("Regex", r"[aeiou]", "Contiguous", invert=True), _bytelevel(False)]}
    elif name == "gpt2_string_split":
        t["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            _split("String", ", ", "Isolated"), _bytelevel(True)]}
    else:
        raise KeyError(name)
    return t, split_special


# name -> (base, which corpus lines: "all" or "short" = lines of at most 100 UTF-8 bytes)
VARIANTS = {
    "qwen3": ("qwen3", "all"),
    "qwen35": ("qwen3", "all"),
    "qwen3_split_special": ("qwen3", "short"),
    "gpt2": ("gpt2", "all"),
    "gpt2_ignore_merges": ("gpt2", "short"),
    "gpt2_prefix_space": ("gpt2", "short"),
    "gpt2_nfkc": ("gpt2", "short"),
    "gpt2_split_special": ("gpt2", "short"),
    "gpt2_removed": ("gpt2", "short"),
    "gpt2_merged_prev": ("gpt2", "short"),
    "gpt2_merged_next": ("gpt2", "short"),
    "gpt2_contiguous_invert": ("gpt2", "short"),
    "gpt2_string_split": ("gpt2", "short"),
}


def selected(which, line):
    return which == "all" or len(line.encode("utf-8")) <= 100
