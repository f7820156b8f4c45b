#!/usr/bin/env python3
"""Builds the tokenizer test corpus: tests/fixtures/tokenizer/corpus.jsonl (one JSON string per line).

Deterministic (fixed seed), so rerunning it reproduces the committed file byte for byte. The corpus
covers what byte-level BPE pre-tokenizers get wrong: source code, prose in many scripts (CJK, RTL,
Devanagari, Thai, Khmer, Hangul), emoji ZWJ sequences, combining marks and non-NFC input,
full-width forms, control characters, whitespace runs, \\r\\n, upper-case contractions, digit runs,
special tokens inside text, long repeats, and random mixtures of characters from every class the
Qwen/GPT-2 regexes distinguish.

Usage: python3 tools/reference/tokenizer/make_corpus.py [OUT]
"""
import json
import random
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests/fixtures/tokenizer/corpus.jsonl"

lines = []


def add(*texts):
    lines.extend(texts)


# --- worked examples from docs/MODELS.md §4.1 -------------------------------------------------------
add("Hello world", " Hello world", "Hello, world!", " ", "  ", "   ", "\n", "\n\n", "\t",
    "    Hello\n    Hello", "3", "333", "12345 3.14", "Führer", "нещо на Български",
    "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "<think>\n\n</think>\n\n",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n")

# --- llama.cpp-style vocab tests: whitespace, digits, contractions -----------------------------
add("", " ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "\t\n", "Hello world", " Hello world",
    "Hello World", " Hello World", " Hello World!", "Hello, world!", " Hello, world!", " this is 🦙.cpp",
    "w048 7tuijk dsdfhu", "нещо на Български", "ირაკლი", "ἀποστολή",
    "កាន់តែពិសេសអាចខលចេញ", "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ (only emoji that has its own token)",
    "Hello", " Hello", "  Hello", "   Hello", "    Hello", "    Hello\n    Hello", " (", "\n =", "' era",
    "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～", "!!!!!!", "3", "33", "333", "3333",
    "33333", "333333", "3333333", "33333333", "333333333", "Cửa Việt", " discards",
    "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ 🦙🦙 3 33 333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 កាន់តែពិសេសអាច😁 ?我想在apple工作1314151天～ ------======= нещо на Български ''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL")

# --- contractions, including upper case and near misses ----------------------------------------
add("I'm here, you're there, it's fine, we've won, they'll go, he'd say, don't",
    "I'M HERE, YOU'RE THERE, IT'S FINE, WE'VE WON, THEY'LL GO, HE'D SAY, DON'T",
    "I'm I'M I'm i'M 'Re 'rE 'vE 'Ve 'Ll 'lL 'D 'S 'T 'M",
    "'s's's 's 't 're 've 'm 'll 'd 'x 'sx 'ss ''s '''s",
    "rock'n'roll o'clock O'Neil d'Artagnan l'homme qu'il",
    "'ſ 'ſt 'K 'ﬅ ’s ‘t ’re", "'", "''", " '", "' ", "'s", " 's", "\n's", "'1", "'é")

# --- source code ---------------------------------------------------------------------------------
add('''#include <stdio.h>

int main(int argc, char** argv) {
    for (int i = 0; i < argc; ++i) {
        printf("%d: %s\\n", i, argv[i]);
    }
    return 0;
}
''',
    '''def fib(n: int) -> int:
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


if __name__ == "__main__":
    print([fib(i) for i in range(20)])
''',
    "fn main() {\n\tlet v: Vec<u32> = (0..10).map(|x| x * x).collect();\n\tprintln!(\"{:?}\", v);\n}\n",
    "const f = async (x) => { await fetch(`/api/${x}?q=1&r=2`); return x?.y ?? 0; };\r\n",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
    "<html><body><div class=\"a\">Hi &amp; bye</div><!-- comment --></body></html>",
    "{\"key\": [1, 2.5, -3e10, true, null, \"\\u00e9\"], \"nested\": {\"a\": {}}}",
    "x+=1;y-=2;z*=3;w/=4;a%=5;b<<=6;c>>=7;d&=8;e|=9;f^=10;g=~h;i=!j;k=l&&m||n;",
    "    if (x) {\n        return;\n    }\n\n\n    else\t\t{  }  \n",
    "$ ls -la /usr/local/bin | grep -E '^d' > out.txt 2>&1 && echo \"done\" # comment",
    "\\documentclass{article}\n\\begin{equation} \\int_0^\\infty e^{-x^2}\\,dx = \\frac{\\sqrt{\\pi}}{2} \\end{equation}",
    "https://example.com/path/to/page?query=a+b&lang=en#section-2 mailto:someone@example.org",
    "| col1 | col2 |\n|------|------|\n| `a`  | **b** |\n\n- item 1\n  - item 2\n> quote\n",
    "0x1F 0b1010 0o777 1_000_000 3.14159e-10 -42 +7 1e+308 .5 5. 1,234,567.89",
    "	tabs	and    spaces   mixed	 	 here	",
    "trailing spaces   \nline two  \r\nline three\t\r\n\r\n\r\nend",
    "a\rb\r\rc\r\n\r\nd\n\re",
    "# Title\n\nSome *emphasis* and __strong__ text; a [link](http://x.y) and `code`.\n",
    "import numpy as np\nx = np.zeros((3, 4), dtype=np.float32)\nprint(x.shape)  # (3, 4)\n",
    "class Foo<T extends Bar> implements Baz { private final Map<String, List<T>> m = new HashMap<>(); }")

# --- prose in many scripts ----------------------------------------------------------------------
add("The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX! the quick brown fox?",
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness...",
    "Dès Noël où un zéphyr haï me vêt de glaçons würmiens, je dîne d'exquis rôtis de bœuf au kir à l'aÿ d'âge mûr & cætera !",
    "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich. Straße, Maß, Fuß.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю. ПРИВЕТ мир!",
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Τάχιστη αλώπηξ βαφής ψημένη γη.",
    "我能吞下玻璃而不伤身体。人工智能正在改变世界，我们需要认真思考它的影响。",
    "日本語のテキスト：私はガラスを食べられます。それは私を傷つけません。カタカナとひらがな、漢字。",
    "한국어 텍스트: 나는 유리를 먹을 수 있어요. 그래도 아프지 않아요. 안녕하세요!",
    "العربية: أنا قادر على أكل الزجاج و هذا لا يؤلمني. مرحبا بالعالم ١٢٣٤٥٦٧٨٩٠",
    "עברית: אני יכול לאכול זכוכית וזה לא מזיק לי. שָׁלוֹם עוֹלָם",
    "فارسی: من می‌توانم بدون احساس درد شیشه بخورم. ۱۲۳۴",
    "हिन्दी: मैं काँच खा सकता हूँ और मुझे उससे कोई चोट नहीं पहुंचती. नमस्ते दुनिया! क्षत्रिय ज्ञान श्री",
    "संस्कृतम्: काचं शक्नोम्यत्तुम् । नोपहिनस्ति माम् ॥ ०१२३४५६७८९",
    "বাংলা: আমি কাঁচ খেতে পারি, তাতে আমার কোনো ক্ষতি হয় না। தமிழ்: நான் கண்ணாடி சாப்பிடுவேன்",
    "ไทย: ฉันกินกระจกได้ แต่มันไม่ทำให้ฉันเจ็บ ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "ខ្មែរ: ខ្ញុំអាចញុំកញ្ចក់បាន ដោយគ្មានបញ្ហារ ភាសាខ្មែរ",
    "ລາວ: ຂອ້ຍກິນແກ້ວໄດ້ໂດຍທີ່ມັນບໍ່ໄດ້ເຮັດໃຫ້ຂອ້ຍເຈັບ. ဗမာ: ကျွန်တော် ကျွန်မ မှန်စားနိုင်တယ်။",
    "Tiếng Việt: Tôi có thể ăn thủy tinh mà không hại gì. Ελληνικά και Ქართული ენა და Հայերեն լեզու",
    "አማርኛ: ብርሃን ዘርዓ ያዕቆብ ፡፡ ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ ᐃᓄᒃᑎᑐᑦ ᑭᓯᐊᓇᑦ",
    "Yoruba: Mo lè je̩ dígí, kò ní pa mí lára. Igbo: Enwere m ike iri iko.",
    "Ǆemal ǅemal ǆemal Ǳ ǲ ǳ ﬁ ﬂ ﬀ ﬃ ǈ İstanbul ıı KELVIN K Å Ω µ ß ẞ")

# --- emoji ----------------------------------------------------------------------------------------
add("👨‍👩‍👧‍👦 family, 👩🏽‍💻 technologist, 🏳️‍🌈 flag, 🇺🇸🇯🇵 flags, 1️⃣ keycap, ❤️‍🔥 heart on fire",
    "😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩😘😗☺️😚😙🥲",
    "👍🏻👍🏼👍🏽👍🏾👍🏿 🧑‍🤝‍🧑 🫠 🫶🏾 🪿 🐈‍⬛ 🏴󠁧󠁢󠁳󠁣󠁴󠁿 scotland",
    "emoji🚀inside✨words🎉and123numbers💯", "©®™℠ ♠♣♥♦ ☀☁☂☃ ✓✔✗✘ ⌘⌥⇧ ←↑→↓ ∀∃∈∉∑∏√∞≠≤≥",
    "📁/📂 🔥🔥🔥 🤖: \"hi\" 👋🏽")

# --- NFC / combining marks / Hangul jamo (normalizer cases) -------------------------------------
add("cafe\u0301 vs caf\u00e9", "e\u0301e\u0301e\u0301", "A\u030a \u212b \u00c5", "n\u0303o\u0308\u0301",
    "\u1100\u1161\u11a8 \u1112\u1161\u11ab\u1100\u1173\u11af", "\u0915\u093c \u0958",
    "o\u0302\u0323 \u1ecd\u0302 \u1ed9", "\u0041\u0301\u0302\u0303\u0304\u0305\u0306\u0307\u0308",
    "\u0301leading combining mark", " \u0301 space then mark", "x\u20dd\u20de\u20df",
    "\u05e9\u05c1\u05b8 \u05d1\u05bc", "Zalgo: Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034da\u0362l\u0315g\u0362o\u0336",
    "\u0958\u0959\u095a \u2126 \u212a \u0344 \u0340\u0341 \u1f71 \u00bd \ufb01",
    "\ufb2a\ufb2b \ud7a3 \uac00\u11a8", "\u0e01\u0e34\u0e4a\u0e49", "\u0644\u0627 \ufefb \u0640\u0640\u0640")

# --- full-width, compatibility forms --------------------------------------------------------------
add("ＡＢＣ ａｂｃ １２３ ！？＃ （全角） ＼ｎ", "ｈｅｌｌｏ　ｗｏｒｌｄ　１２３", "ｶﾀｶﾅ ﾊﾝｶｸ ｰ", "①②③ ⅠⅡⅢ ⅰⅱⅲ ¹²³ ₁₂₃ ½¼¾ ⁴⁄₅",
    "㈱ ㍻ ㎏ ㎞ ℃ ℉ № ℡ ™", "𝐇𝐞𝐥𝐥𝐨 𝕎𝕠𝕣𝕝𝕕 𝒶𝒷𝒸 𝟙𝟚𝟛", "Ｈｅｌｌｏ，　Ｗｏｒｌｄ！")

# --- control characters and odd whitespace -------------------------------------------------------
add("\x00\x01\x02\x03\x04\x05\x06\x07\x08", "a\x00b\x7fc\x1bd", "\x0b\x0c\x1c\x1d\x1e\x1f",
    "bell\x07 backspace\x08 escape\x1b[31mred\x1b[0m", "\u0085NEL\u0085 \u2028LS\u2029PS",
    "nbsp\u00a0here \u00a0\u00a0 two", "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a|",
    "\u202f\u205f\u3000ideographic\u3000space", "zero\u200bwidth\u200cnon\u200djoiner\u2060word\ufeffbom",
    "\u180emongolian\u180evowel", "\u200e\u200f\u202a\u202b\u202c\u202d\u202e rtl marks",
    "\ue000\uf8ff private \U000f0000", "\ufffd replacement \ufffe\uffff nonchars",
    "soft\u00adhyphen", "\u00a0", "\u3000", "\u2028", "\u0085", " \u00a0", "\u00a0 ", "\t \u3000 \n")

# --- whitespace runs ----------------------------------------------------------------------------
add("a  b   c    d     e", "a\n\nb\n\n\nc", "   leading", "trailing   ", "  both  ",
    "\n\n\nleading newlines", "trailing newlines\n\n\n", "mixed \n \n\t\n  x",
    " \n", "\n ", " \n ", "  \n  ", "\t\t\tx", "x\t\t\t", "\r\n", "\r\n\r\n", "\r", "\n\r",
    "a \r\n b", "a\r\n\r\n  b", "word \n\n word", " ! ", " !\n", "!!\n\n", "?\r\n\r\nok",
    "    def f():\n        pass\n    \n    \n", "x" + " " * 40 + "y", "\n" * 30, " " * 33, "\t" * 17,
    " \t" * 20 + "z", "a" + " \n" * 10 + "b")

# --- digits -------------------------------------------------------------------------------------
add("0123456789", "3.14159265358979323846264338327950288419716939937510", "2024-01-15T12:34:56Z",
    "+1 (555) 123-4567", "1e10 1E-10 0.000001", "١٢٣ ۴۵۶ ४५६ ৭৮৯ ๑๒๓ ༡༢༣ ⑴⑵ ⒈⒉", "v1.2.3-rc.4+build.567",
    "IPv4 192.168.0.1 IPv6 2001:db8::ff00:42:8329", "$1,000,000.00 €2.50 ¥300 £4", "x1y2z3", "1st 2nd 3rd 4th")

# --- special tokens inside text -------------------------------------------------------------------
add("Hello<|endoftext|>World", "<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\nhi<|im_end|>",
    "<|im_start|><|im_end|><|im_start|>", "a<|im_start|>b<|im_end|>c", " <|im_start|> spaced <|im_end|> ",
    "<|im_start|", "<|im_start", "|im_start|>", "<|im_start|>>", "<<|im_start|>", "<|im_start|><|im_end",
    "<think>reasoning</think>answer", "<think>\nstep 1\n</think>\n\nfinal", "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
    "<tool_response>\nok\n</tool_response>", "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>",
    "<|vision_start|><|image_pad|><|vision_end|>describe", "<|object_ref_start|>cat<|object_ref_end|><|box_start|>(1,2)<|box_end|>",
    "<|repo_name|>specserve<|file_sep|>main.cpp", "<|endoftext|><|endoftext|>", "</think></think><think>",
    "<|IM_START|> <|im_start |> < |im_start|>", "text<|im_end|>\n\n<|endoftext|>   ",
    "<s> </s> <unk> <pad> [CLS] [SEP] [MASK] <mask>",
    # tokens of the GPT-2-style test tokenizer (lstrip / rstrip / single_word / normalized variants)
    "<|endoftext|>", "fill the <mask> here", "fill the    <mask>    here", "<mask>start", "end<mask>",
    "x [RSTRIP]   y", "[RSTRIP]\n\nz", "cat concatenate cats the cat. cat,cat _cat cat_ 3cat caté",
    "cat", " cat ", "a cat\n", "caféine café cafe\u0301 CAFÉ", "naïve nai\u0308ve", "<|user|>hi<|assistant|>",
    "<|user|><|user|> <|assistant|>\n<|user|>")

# --- long repeats -----------------------------------------------------------------------------------
add("a" * 3000, " " * 2000, "\n" * 500, "ab" * 1000, "1" * 700, "🚀" * 300, "é" * 400,
    "e\u0301" * 300, "的" * 800, "!" * 1500, ("lorem ipsum " * 200).strip(), "x " * 600,
    "<|im_start|>" * 50, "aaaaaaaaaa" * 100 + " " + "bbbbbbbbbb" * 100, ". " * 400, "\u0301" * 200,
    "Hello" * 300, "\t\n" * 300, "ZZZ" * 600 + "\n")

# --- random mixtures from every class the regexes distinguish ------------------------------------
POOLS = {
    "lower": "abcdefghijklmnopqrstuvwxyz", "upper": "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "digit": "0123456789", "otherdigit": "٣४๕①²Ⅻ½",
    "space": " ", "ws": "\t\n\r\x0b\x0c\u00a0\u2003\u3000\u0085\u2028",
    "punct": "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~", "apos": "'",
    "latin": "éüñçøåßæœ", "cjk": "的一是不了人我在有他", "kana": "あいうカキク", "hangul": "가나다한",
    "cyr": "абвгдЖЗИ", "greek": "αβγΔΣΩ", "arabic": "ابتثجح", "hebrew": "אבגדה",
    "deva": "कखगघअआ", "deva_marks": "\u093e\u093f\u0940\u094d\u0902\u0901", "mark": "\u0301\u0308\u0327\u20dd",
    "thai": "กขคง\u0e34\u0e48", "emoji": "😀🚀👍🏽❤️", "zwj": "\u200d", "vs": "\ufe0f",
    "symbol": "©®™€£¥§¶•…‰→⇒∞≈", "control": "\x00\x01\x1b\x7f", "format": "\u200b\u200e\ufeff\u00ad",
    "contraction": ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D"],
    "special": ["<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|endoftext|>", "<mask>", "cat"],
}
rng = random.Random(20240601)
names = list(POOLS)
for n in range(260):
    k = rng.choice([1, 2, 3, 4, 6])
    chosen = rng.sample(names, k)
    length = rng.choice([1, 2, 3, 5, 8, 13, 21, 40, 80])
    s = []
    for _ in range(length):
        pool = POOLS[rng.choice(chosen)]
        s.append(rng.choice(pool))
    lines.append("".join(s))

for line in lines:
    assert isinstance(line, str)
    line.encode("utf-8")  # no lone surrogates
OUT.parent.mkdir(parents=True, exist_ok=True)
with open(OUT, "w", encoding="utf-8", newline="\n") as f:
    for line in lines:
        f.write(json.dumps(line, ensure_ascii=False) + "\n")
nonnfc = sum(1 for l in lines if unicodedata.normalize("NFC", l) != l)
print(f"wrote {len(lines)} lines, {sum(len(l.encode()) for l in lines)} bytes ({nonnfc} not NFC) to {OUT}")
