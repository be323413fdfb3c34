"""Tokenizer parity: `titan encode` / `titan decode` against Hugging Face `tokenizers` on the same
tokenizer.json (Qwen3's), on a varied hand-picked corpus and a few hundred seeded random Unicode
strings. One `titan encode --jsonl` call encodes all texts of a test."""
import json
import struct
import random
import subprocess

import pytest
from tokenizers import Tokenizer

from conftest import TITAN, TOKENIZER_DIR

CORPUS = [
    "",
    "Hello world!",
    "The quick brown fox jumps over the lazy dog.",
    "don't I'M you're WE'VE they'll she'd it's 'S 'Ll",
    "numbers 1234567 3.14159 -42 1e10 0x1F 2024-11-29",
    "def f(x):\n    return x ** 2  # square\n\n\nclass A:\n\tpass\n",
    "\n\n\n   \t",
    "   leading and trailing spaces   ",
    "tabs\t\tand\r\nwindows\r\nlines\r\n",
    "中文测试：你好，世界！日本語のテキストです。한국어 텍스트",
    "emoji 😀👍🏽👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵 and ❤️",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello<|im_end|>",
    "text<|endoftext|>more text<|endoftext|><|endoftext|>",
    "<|im_start|><|im_start|>x<|im_end|",  # an unfinished token stays plain text
    "café naïve résumé",  # NFC (precomposed)
    "cafe\u0301 nai\u0308ve re\u0301sume\u0301",  # NFD: the normalizer composes it
    "\u212b \u2126 \uFB01 \u00bd",  # singletons and compatibility characters
    "Ελληνικά Русский текст עברית العربية हिन्दी ไทย",
    "mixed123abc ABC123 x1y2z3 ½ ² Ⅷ ٣",
    "punctuation!!! ??? ... --- === ''' \"\"\" ``` ~~~ @@@ ###",
    "url https://example.com/a?b=c&d=e#f and email a.b@c.org",
    "a" * 300 + " " + "ab" * 200,
    " " * 50 + "x" + "\n" * 20 + "y",
    "\u00a0nbsp\u3000ideographic\u2003em space\u2028line sep",
    "zero\u200bwidth\u200djoiner\ufeffbom",
    "a\u180eb  \u180e x\u0085y \u0085\u0085z \u001cq",  # U+180E: see the note below
    "newer letters \U00031350\U00011f04\U0001e4d0 end",  # Unicode 15 additions
]

# Regex engines: HF runs the pattern on Oniguruma, titan on PCRE2 (10.42, Unicode 14). Their \s
# differ on U+180E MONGOLIAN VOWEL SEPARATOR (PCRE2 counts it as space; Unicode dropped it from
# White_Space in 6.3), which titan fixes by spelling \s out as the White_Space class: it is in the
# corpus below, not excluded. Only surrogates are left out of the random strings, since a Python
# str holding one cannot be sent as UTF-8.
EXCLUDED = set(range(0xD800, 0xE000))

RANGES = [
    (0x20, 0x7E), (0x09, 0x0D), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF),
    (0x590, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x1680, 0x1680),
    (0x1800, 0x18AF), (0x2000, 0x206F), (0x2070, 0x218F), (0x3000, 0x30FF), (0x4E00, 0x9FFF),
    (0xAC00, 0xD7A3), (0xFB00, 0xFFFD), (0x1F300, 0x1FAFF), (0x10000, 0x10FFFF), (0x0, 0xFFFF),
]


def random_texts(seed=1234, count=300):
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        chars = []
        for _ in range(rng.randint(1, 40)):
            lo, hi = rng.choice(RANGES)
            cp = rng.randint(lo, hi)
            if cp in EXCLUDED:
                cp = 0x20
            chars.append(chr(cp))
        texts.append("".join(chars))
    return texts


# Pieces of code and prose mixed with the characters that decide a pre-tokenizer match where
# ASCII meets non-ASCII (titan matches ASCII stretches by hand and asks PCRE2 elsewhere): letters,
# marks, spaces such as U+00A0 and U+3000, U+017F (which (?i) folds to 's'), digits of other
# scripts, emoji, newlines and added tokens inside words.
FRAGMENTS = [
    "def", " f", "(x)", ":", "\n", "    ", "\t", "\r\n", "\n\n", "  ", " ", "return", " x",
    "**", "2", "2024", " 3.14", "#", " # note", "'s", "'S", "'re", "'LL", "'ve", "'d", "'m",
    "'t", "'", "don", "\"", "==", "->", "_", "self", ".", ",", "é", "e\u0301", "\u0301",
    "café", "ſ", "'ſ", "K", "\u00a0", "\u3000", "\u2028", "\u0085", "\u180e", "\u200b",
    "中文", "日本語", "한국어", "٣", "Ⅻ", "²", "😀", "👍🏽", "\x0b", "\x0c", "\x01", "\x7f",
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>",
]


def fragment_texts(seed=99, count=600):
    rng = random.Random(seed)
    return ["".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 30)))
            for _ in range(count)]


@pytest.fixture(scope="module")
def hf():
    return Tokenizer.from_file(str(TOKENIZER_DIR / "tokenizer.json"))


def titan_encode_jsonl(texts, tokenizer=TOKENIZER_DIR):
    payload = "".join(json.dumps({"text": t}) + "\n" for t in texts).encode()
    proc = subprocess.run([str(TITAN), "encode", "--tokenizer", str(tokenizer), "--jsonl"],
                          input=payload, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stdout.decode().split("\n")[:-1]  # not splitlines(): texts may hold U+2028
    assert len(lines) == len(texts)
    return [json.loads(line) for line in lines]


def titan_run(args, stdin: bytes):
    return subprocess.run([str(TITAN), *args], input=stdin, capture_output=True, timeout=120)


def assert_same_ids(texts, hf, tokenizer=TOKENIZER_DIR):
    ours = titan_encode_jsonl(texts, tokenizer)
    mismatches = [(t, o, h) for t, o, h in zip(texts, ours, (e.ids for e in hf.encode_batch(texts)))
                  if o != h]
    assert not mismatches, "first mismatches (text, titan, hf):\n" + "\n".join(
        repr(m) for m in mismatches[:5])


def test_corpus_parity(titan_bin, hf):
    assert_same_ids(CORPUS, hf)


def test_random_unicode_parity(titan_bin, hf):
    assert_same_ids(random_texts(), hf)


def test_mixed_fragment_parity(titan_bin, hf):
    assert_same_ids(fragment_texts(), hf)


def test_whole_stdin_is_one_text(titan_bin, hf):
    text = "line one\nline two <|im_end|>\n\n  中文 😀\n"
    proc = titan_run(["encode", "--tokenizer", str(TOKENIZER_DIR)], text.encode())
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout) == hf.encode(text).ids


def titan_decode_jsonl(id_lists):
    payload = "".join(json.dumps(ids) + "\n" for ids in id_lists).encode()
    proc = titan_run(["decode", "--tokenizer", str(TOKENIZER_DIR), "--jsonl"], payload)
    assert proc.returncode == 0, proc.stderr.decode()
    return [json.loads(line) for line in proc.stdout.decode().split("\n")[:-1]]


def test_decode_round_trip(titan_bin, hf):
    id_lists = [hf.encode(t).ids for t in CORPUS + random_texts(seed=7, count=100)]
    expected = [hf.decode(ids, skip_special_tokens=False) for ids in id_lists]
    assert titan_decode_jsonl(id_lists) == expected
    # The plain form: one JSON array in, the raw text out with no newline added.
    proc = titan_run(["decode", "--tokenizer", str(TOKENIZER_DIR)], json.dumps(id_lists[11]).encode())
    assert proc.returncode == 0 and proc.stdout.decode() == expected[11]


def test_decode_partial_utf8_like_hf(titan_bin, hf):
    # Lone byte-level tokens of multi-byte characters are invalid UTF-8: HF writes U+FFFD.
    ids = hf.encode("😀中 é").ids
    pieces = [ids[:1], ids[:1] + ids[-1:], ids[::-1], ids[1:], [ids[0]] * 3]
    assert titan_decode_jsonl(pieces) == [hf.decode(p, skip_special_tokens=False) for p in pieces]


def test_added_token_flags(titan_bin, hf, tmp_path):
    # lstrip / rstrip / single_word / normalized change how added tokens are found; Qwen3 sets
    # none of them, so check them on a copy of its tokenizer.json that sets each one.
    config = json.loads((TOKENIZER_DIR / "tokenizer.json").read_text())
    flags = {"<|im_start|>": {"lstrip": True}, "<|im_end|>": {"rstrip": True},
             "<think>": {"single_word": True}, "</think>": {"normalized": True}}
    for token in config["added_tokens"]:
        token.update(flags.get(token["content"], {}))
    (tmp_path / "tokenizer.json").write_text(json.dumps(config, ensure_ascii=False))
    texts = ["a  <|im_start|>b", "\n\t<|im_start|>", "x<|im_end|>   y", "<|im_end|>\n\nz",
             "a <think> b", "a<think>b", "<think>", "_<think>", "é<think> ", "x </think> y",
             "<|im_start|>  <|im_end|>  <|im_start|>"]
    assert_same_ids(texts, Tokenizer.from_file(str(tmp_path / "tokenizer.json")), tmp_path)


def test_errors_are_one_line(titan_bin, tmp_path):
    bad_line = titan_run(["encode", "--tokenizer", str(TOKENIZER_DIR), "--jsonl"],
                         b'{"text": "ok"}\n{"text": oops}\n')
    assert bad_line.returncode != 0 and b"line 2" in bad_line.stderr and bad_line.stdout == b""
    missing = titan_run(["encode", "--tokenizer", str(tmp_path / "nowhere")], b"x")
    assert missing.returncode != 0 and b"nowhere" in missing.stderr
    out_of_range = titan_run(["decode", "--tokenizer", str(TOKENIZER_DIR)], b"[1, 999999]")
    assert out_of_range.returncode != 0 and b"999999" in out_of_range.stderr
    for sub in ("encode", "decode", "tokenize"):
        assert titan_run([sub, "--help"], b"").returncode == 0


def test_tokenize_shards_hold_hf_ids(titan_bin, hf, tmp_path):
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in CORPUS[1:12]))
    text_doc = tmp_path / "doc.txt"
    text_doc.write_text("a whole file\nis one document\n")
    prefix = tmp_path / "shards" / "corpus"
    proc = titan_run(["tokenize", "--tokenizer", str(TOKENIZER_DIR), "--input", str(corpus),
                      str(text_doc), "--output", str(prefix), "--shard-tokens", "40"], b"")
    assert proc.returncode == 0, proc.stderr.decode()
    meta = json.loads(prefix.with_suffix(".json").read_text())
    eos = hf.token_to_id("<|endoftext|>")
    expected = []
    for text in CORPUS[1:12] + [text_doc.read_text()]:
        expected += hf.encode(text).ids + [eos]
    ids = []
    for shard in meta["shards"]:
        data = (prefix.parent / shard["file"]).read_bytes()
        # The v2 layout (README.md "Token shards"): 32-byte header, u64 document ends, u32 ids.
        assert data[:8] == b"TITANTOK"
        tokens, documents = struct.unpack_from("<QQ", data, 16)
        start = 32 + 8 * documents
        ids += list(struct.unpack_from(f"<{tokens}I", data, start))
    assert ids == expected and meta["tokens"] == len(expected) and len(meta["shards"]) > 1
