"""Parity: the C++ WordPieceTokenizer gives exactly Hugging Face `tokenizers`' ids.

Over 5,000+ texts -- real Quora questions plus generated edge cases (accents, CJK, kana,
Hangul, Arabic, Hindi, Thai, emoji sequences, control and zero-width characters, combining
marks, words over 100 characters, texts over 256 tokens, whitespace-only and empty texts,
literal special tokens, punctuation, digits, random code points and invalid UTF-8) -- the
ids and the truncation flag printed by the C++ tool tests/text/tokenize_dump must equal HF's
(Tokenizer.from_file on the model's tokenizer.json, truncation 256, no padding; invalid UTF-8
is given to HF as raw.decode("utf-8", "replace"), which is what the C++ side does too).

Run:  .venv/bin/python -m pytest tests/python/test_tokenizer_parity.py -q
Needs: the build ($TAILCUT_BUILD_DIR, default <repo>/build, target tokenize_dump), the model
($TAILCUT_MODEL_DIR, default <repo>/models/all-MiniLM-L6-v2) and the QQP pairs
($TAILCUT_SHARED_DATA/qqp/pairs.jsonl.gz, default <repo>/../shared/data/qqp/pairs.jsonl.gz):
without them the parity tests skip (fail with TAILCUT_REQUIRE_SHARED_DATA=1, as in CI).
"""

from __future__ import annotations

import base64
import gzip
import json
import random
import subprocess
from pathlib import Path

import pytest
from conftest import build_dir, model_dir, require_file, require_shared_data

tokenizers = pytest.importorskip("tokenizers")

MAX_LENGTH = 256
QQP_QUESTIONS = 4000
MIN_TEXTS = 5000


# --- Fixtures -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tokenizer_json() -> Path:
    return require_file(model_dir() / "tokenizer.json", "model tokenizer.json",
                        "Run scripts/setup.sh, or set TAILCUT_MODEL_DIR to the "
                        "all-MiniLM-L6-v2 folder.")


@pytest.fixture(scope="module")
def tokenize_dump() -> Path:
    return require_file(build_dir() / "tests" / "text" / "tokenize_dump", "tokenize_dump binary",
                        "Build it: cmake --build build --target tokenize_dump "
                        "(or set TAILCUT_BUILD_DIR to your build folder).")


@pytest.fixture(scope="module")
def qqp_questions() -> list[str]:
    path = require_shared_data("qqp/pairs.jsonl.gz", "QQP pairs (real questions for the parity corpus)")
    seen: dict[str, None] = {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            for key in ("a", "b"):
                q = row.get(key)
                if isinstance(q, str):
                    seen.setdefault(q, None)
            if len(seen) >= QQP_QUESTIONS:
                break
    return list(seen)


@pytest.fixture(scope="module")
def corpus(qqp_questions) -> list[bytes]:
    texts = [q.encode("utf-8") for q in qqp_questions] + edge_cases(qqp_questions)
    assert len(texts) >= MIN_TEXTS, len(texts)
    return texts


# --- Edge cases ---------------------------------------------------------------------------------

def edge_cases(questions: list[str]) -> list[bytes]:
    rng = random.Random(20240917)
    s: list[str] = []

    s += ["Crème brûlée", "naïve café", "Ångström", "São Paulo", "e\u0301le\u0300ve", "Tiếng Việt",
          "Zażółć gęślą jaźń", "İstanbul ıIiİ", "Straße STRASSE ẞ", "ΟΔΥΣΣΕΥΣ ὀδυσσεύς", "Ǆemal ǅ ǆ",
          "Привет, как дела?", "Ёлка", "ﬁnance ﬀ", "Å Å Å", "ḱṷṓn", "Ωmega Ω", "K Kelvin",
          "Ⅻ ⅻ", "ǰ ΐ ŉ", "Ⓐⓑ", "𝐀𝐁𝐂 𝒜", "ＡＢＣ ａｂｃ １２３"]
    s += ["我爱北京天安门", "机器学习是什么？", "𠀀𠀁 𪜀 𫝀 𫠠 𬺰", "豈 更 車 ", "中文English混合",
          "。、「」『』【】", "這是繁體中文。", "\u2f00\u2e80 \u31c0", "\U0002b820\U0002b91f"]
    s += ["ひらがな カタカナ", "東京で一番おいしいラーメンは？", "ｶﾀｶﾅ ｶﾞｷﾞ ﾊﾟ", "ゔ ゕ ゟ ヿ", "ー〜"]
    s += ["한국어를 배우는 가장 좋은 방법은?", "안녕하세요", "각 ㄱㅏ", "가나다라마바사"]
    s += ["مَرْحَبًا بِالْعَالَم", "السلام عليكم", "שָׁלוֹם עוֹלָם", "नमस्ते दुनिया", "हिन्दी",
          "สวัสดีครับ", "ภาษาไทย", "வணக்கம்", "বাংলা ভাষা", "ქართული", "Հայերեն", "ትግርኛ",
          "ພາສາລາວ", "မြန်မာ", "ខ្មែរ", "ᠮᠣᠩᠭᠣᠯ", "ꦗꦮ", "𓀀𓀁 𓐰"]
    s += ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸🇯🇵", "1️⃣ #️⃣", "❤️", "☺︎", "I ❤ NY 🗽!",
          "👩🏿‍💻 coding", "🧑‍🤝‍🧑", "🫠🫶🏻", "emoji😀inside", "👋🏼👋🏽👋🏾"]
    s += ["\x00", "a\x00b", "\x07bell", "\x1b[31mred\x1b[0m", "del\x7f", "\x85next", "a\x0bb\x0cc",
          "line1\r\nline2", "tab\there", "\x1c\x1d\x1e\x1f", "\u2028\u2029", "\ufffd", "a\ufffdb",
          "\ue000private\U000f0000", "\U000e0041tag", "\u0600\u061c\u06dd"]
    s += ["zero\u200bwidth", "zw\u200cnj", "zw\u200dj", "\ufeffbom", "word\u2060joiner",
          "soft\u00adhyphen", "\u200e\u200fdir", "\u202aembed\u202c", "\u2066iso\u2069"]
    s += ["a\u0301\u0316", "Z̤̈a̐l̨g̵o̴ t̷e̶x̵t̸", "e\u0301\u0301\u0301\u0301", "\u0301start",
          "x\U0001d16d\U0001d165", "a\u0345\u0301", "\u0e34\u0e38", "क्ष", "o\u0308\u0304", "\u20dd\u20e3",
          "\u1ab0\u1dc0 \u0898\u08ca", "ṩ ḉ", "\u0340\u0341\u0343\u0344"]
    for n in (99, 100, 101, 102, 150, 1000):
        s.append("a" * n)
        s.append("é" * n)
        s.append("x" + "y" * (n - 1) + " end")
    s += ["supercalifragilisticexpialidocious" * 4, "##" * 60, "#" * 101,
          "https://example.com/" + "path/" * 30 + "?q=" + "x" * 50, "a" * 100 + "!" + "b" * 100,
          "pneumonoultramicroscopicsilicovolcanoconiosis", "日本語" * 40]
    s += ["", " ", "   ", "\t\n", "\u3000\u00a0\u2003", "\u2028", "\n\n\n", " \u200b "]
    s += ["[CLS]", "[SEP]", "[sep]", "[MASK]", "x[MASK]y", "[PAD][UNK]", "[CLS][SEP][MASK]",
          "[[SEP]]", "[SEP", "[MASK ]", "[ MASK]", "[UNK]abc", "[CLS] question [SEP] answer",
          "[Sep] [cls] [mask]", "[SEP]é[SEP]", "[ＳＥＰ]", "[SEP]\u0301", "\u00e9[MASK]\u0301"]
    s += ["Hello!!!???", "a.b,c;d:e", "«quotes» „de“", "‘single’ “double”", "—–-‐‑", "@#$%^&*()",
          "C++/C#", "e-mail", "1,000.50", "$100 €200 ¥300 £4", "100%", "¿Qué?", "¡Hola!", "...",
          "foo_bar-baz", "a~b`c", "⁇ ‼ ⁈", "§ ¶ † ‡", "・ ‧ ·", "⸮ ⹃ ⹏", "᙭ ᥄", "꧁꧂", "«»‹›",
          "(((nested)))", "'quoted'", '"dq"', "under_score__", "x^2+y^2=z^2"]
    s += ["123456789", "٣٤٥ ۴۵۶", "१२३", "½ ⅓ ²³ ¹", "Ⅻ", "１２３", "3.14159", "-42", "1e10",
          "0x1F", "٠١٢", "๑๒๓", "𝟙𝟚𝟛", "⑴⑵ ①②"]

    # Long texts: far past 256 tokens, ASCII and not, to exercise truncation.
    for i in range(40):
        chunk = " ".join(questions[i * 30:(i + 1) * 30])
        s.append(chunk)
        s.append(chunk.replace("e", "é").replace("a", "å"))
    s.append("word " * 600)
    # ASCII / non-ASCII span boundaries (the C++ side cuts text at ASCII whitespace).
    s += ["word \u0301mark", "é\u0301 \u0316x", "ascii\té\nascii\r\nü end", "a \u00a0b é\u3000c",
          "é" * 5000, "é " * 3000, "aé " * 2000 + "end", "x " * 2000 + "é" * 10 + " y" * 10,
          "Ünïcödé " * 700, "\u0301 " * 600, ("question? " * 50 + "réponse! ") * 20]
    s.append("中" * 600)
    s.append("[SEP]" * 300)
    s.append("é " * 300)

    # Random code points: any scalar value, weighted towards the assigned BMP.
    def random_cp() -> str:
        r = rng.random()
        if r < 0.5:
            cp = rng.randrange(0x80, 0x3400)
        elif r < 0.7:
            cp = rng.randrange(0x3400, 0x10000)
        elif r < 0.95:
            cp = rng.randrange(0x10000, 0x30000)
        else:
            cp = rng.randrange(0x30000, 0x110000)
        if 0xD800 <= cp <= 0xDFFF:
            cp = 0xE000
        return chr(cp)

    for _ in range(800):
        s.append("".join(random_cp() for _ in range(rng.randrange(1, 30))))
    # Real questions sprinkled with random characters and marks.
    for q in rng.sample(questions, 400):
        chars = list(q)
        for _ in range(rng.randrange(1, 6)):
            chars.insert(rng.randrange(len(chars) + 1), random_cp())
        s.append("".join(chars))
    # Mixed scripts word salad.
    pool = [w for t in s[:200] for w in t.split()]
    for _ in range(300):
        s.append(" ".join(rng.choice(pool) for _ in range(rng.randrange(1, 12))))

    out = [t.encode("utf-8") for t in s]

    # Invalid UTF-8: handcrafted and random.
    out += [b"\xff", b"\xfe\xff", b"abc\x80def", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80",
            b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf0\x9f\x98", b"\xf0\x9f\x98 smile",
            b"caf\xc3", b"caf\xc3 ok", b"\xe2\x82\xe2\x82\xac", b"[SEP]\xff[CLS]", b"[SE\x80P]",
            b"\xc3\xa9\x80\xc3\xa9", b"hel\xfflo wor\xfeld", b"\x80" * 300, b"\xf8\x88\x80\x80\x80",
            b"a\xcc", b"\xe4\xb8", b"\xe4\xb8\xad\xe4", b"[MASK]\xe4\xb8"]
    for _ in range(300):
        out.append(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))))
    for q in rng.sample(questions, 200):
        b = bytearray(q.encode("utf-8"))
        for _ in range(rng.randrange(1, 4)):
            b.insert(rng.randrange(len(b) + 1), rng.choice([0x80, 0xbf, 0xc3, 0xe2, 0xf0, 0xff]))
        out.append(bytes(b))
    return out


# --- Running both sides -------------------------------------------------------------------------

def hf_encode(tokenizer_json: Path, texts: list[bytes], max_length: int) -> list[tuple[list[int], bool]]:
    tok = tokenizers.Tokenizer.from_file(str(tokenizer_json))
    tok.no_padding()
    full = tokenizers.Tokenizer.from_file(str(tokenizer_json))
    full.no_padding()
    full.no_truncation()
    tok.enable_truncation(max_length)
    decoded = [t.decode("utf-8", "replace") for t in texts]
    cut = tok.encode_batch(decoded)
    whole = full.encode_batch(decoded)
    return [(c.ids, len(w.ids) > max_length) for c, w in zip(cut, whole)]


def cpp_encode(dump: Path, tokenizer_json: Path, texts: list[bytes], *extra: str) -> list[dict]:
    payload = b"".join(base64.b64encode(t) + b"\n" for t in texts)
    proc = subprocess.run([str(dump), "--tokenizer", str(tokenizer_json), *extra], input=payload,
                          capture_output=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == len(texts), f"{len(lines)} outputs for {len(texts)} inputs"
    return [json.loads(line) for line in lines]


def show(text: bytes) -> str:
    try:
        return repr(text.decode("utf-8"))[:160]
    except UnicodeDecodeError:
        return "bytes " + repr(text)[:160]


def compare(texts, expected, actual) -> None:
    bad = []
    for text, (ids, truncated), got in zip(texts, expected, actual):
        if got.get("ids") != ids or got.get("truncated") != truncated:
            bad.append((text, ids, truncated, got))
    if bad:
        lines = [f"{len(bad)} of {len(texts)} texts differ from HF; first ones:"]
        for text, ids, truncated, got in bad[:15]:
            lines.append(f"  {show(text)}\n      HF  {ids} truncated={truncated}\n      C++ {got}")
        pytest.fail("\n".join(lines), pytrace=False)


# --- Tests --------------------------------------------------------------------------------------

def test_ids_match_hugging_face(corpus, tokenizer_json, tokenize_dump):
    expected = hf_encode(tokenizer_json, corpus, MAX_LENGTH)
    actual = cpp_encode(tokenize_dump, tokenizer_json, corpus, "--max-length", str(MAX_LENGTH))
    compare(corpus, expected, actual)
    truncated = sum(1 for _, t in expected if t)
    print(f"\nparity: {len(corpus)} texts, 100% identical ids ({truncated} truncated)")
    assert truncated >= 60  # The corpus really exercises truncation.


def test_short_limit_matches_hugging_face(corpus, tokenizer_json, tokenize_dump):
    # A tiny limit truncates nearly everything, including inside words and after special tokens.
    texts = corpus
    expected = hf_encode(tokenizer_json, texts, 8)
    actual = cpp_encode(tokenize_dump, tokenizer_json, texts, "--max-length", "8")
    compare(texts, expected, actual)


def test_no_truncate_refuses_long_texts(corpus, tokenizer_json, tokenize_dump):
    texts = [t for t in corpus if len(t) > 1000][:40] + corpus[:200]
    expected = hf_encode(tokenizer_json, texts, MAX_LENGTH)
    actual = cpp_encode(tokenize_dump, tokenizer_json, texts, "--no-truncate")
    for text, (ids, truncated), got in zip(texts, expected, actual):
        if truncated:
            error = got.get("error", "")
            assert error.startswith("payload_too_large") and "limit of 256" in error, \
                (show(text), got)
        else:
            assert got == {"ids": ids, "truncated": False}, (show(text), got)


def hf_encode_pairs(tokenizer_json: Path, pairs: list[tuple[bytes, bytes]],
                    max_length: int) -> list[dict]:
    tok = tokenizers.Tokenizer.from_file(str(tokenizer_json))
    tok.no_padding()
    tok.enable_truncation(max_length)  # HF's default strategy: longest_first.
    decoded = [(a.decode("utf-8", "replace"), b.decode("utf-8", "replace")) for a, b in pairs]
    return [{"ids": e.ids, "type_ids": e.type_ids, "truncated": bool(e.overflowing)}
            for e in tok.encode_batch(decoded)]


def test_pairs_match_hugging_face(corpus, tokenizer_json, tokenize_dump):
    # Cross-encoders read [CLS] a [SEP] b [SEP]. Consecutive corpus texts as pairs: real
    # questions beside each other and every edge case beside a neighbour, at the cross-encoder's
    # 64 tokens, the model's 256, and limits where the room left is odd and even. HF computes
    # every combination of the two texts' overflowing windows when it cuts a pair (thousands
    # of windows each for the corpus's longest texts at a small limit: tens of GB), so the
    # texts are capped in bytes, harder for the small limits.
    for max_length, max_bytes in ((64, 2000), (MAX_LENGTH, 2000), (9, 300), (10, 300)):
        texts = [t for t in corpus if len(t) <= max_bytes]
        pairs = list(zip(texts[0::2], texts[1::2]))
        pairs += [(b"", b""), (texts[0], b""), (b"", texts[0])]
        longest = sorted(texts, key=len)[-6:]
        pairs += [(x, y) for x in longest[:3] for y in longest[3:]]  # Both over the limit.
        encoded = b"".join(base64.b64encode(a) + b" " + base64.b64encode(b) + b"\n"
                           for a, b in pairs)
        expected = hf_encode_pairs(tokenizer_json, pairs, max_length)
        proc = subprocess.run([str(tokenize_dump), "--tokenizer", str(tokenizer_json), "--pair",
                               "--max-length", str(max_length)], input=encoded,
                              capture_output=True, check=False, timeout=600)
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
        actual = [json.loads(line) for line in proc.stdout.decode().splitlines()]
        assert len(actual) == len(pairs)
        bad = [(a, b, e, g) for (a, b), e, g in zip(pairs, expected, actual) if e != g]
        if bad:
            lines = [f"max_length {max_length}: {len(bad)} of {len(pairs)} pairs differ from HF:"]
            for a, b, e, g in bad[:10]:
                lines.append(f"  {show(a)} / {show(b)}\n      HF  {e}\n      C++ {g}")
            pytest.fail("\n".join(lines), pytrace=False)
        truncated = sum(1 for e in expected if e["truncated"])
        print(f"\npair parity at {max_length}: {len(pairs)} pairs identical ({truncated} cut)")
        assert truncated > 0


def test_unicode_overrides_match_installed_tokenizers():
    # The override tables describe one `tokenizers` release; another may use other Unicode tables.
    generated = (Path(__file__).resolve().parents[2] / "src" / "text" / "unicode_overrides.cc")
    text = generated.read_text(encoding="utf-8")
    marker = 'kHfTokenizersVersion = "'
    version = text[text.index(marker) + len(marker):].split('"', 1)[0]
    assert version == tokenizers.__version__, (
        f"src/text/unicode_overrides.cc was generated for tokenizers {version}, but "
        f"{tokenizers.__version__} is installed: rerun tools/gen_unicode_overrides.py, rebuild, "
        f"and run tools/tokenizer_unicode_audit.py")
