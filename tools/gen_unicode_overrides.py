#!/usr/bin/env python3
"""Generates src/text/unicode_overrides.cc: where Hugging Face `tokenizers` disagrees with utf8proc.

Why this exists: the C++ BERT normalizer and pre-tokenizer take their Unicode data from utf8proc
(one Unicode version), but HF `tokenizers` takes it from several Rust crates that each froze a
different Unicode version:
  * `unicode_categories` (is_other / is_punctuation / is_mark_nonspacing): an old Unicode, so
    marks, punctuation and format characters added since are not Mn / P* / Cf for HF;
  * `unicode-normalization-alignments` (NFD, canonical combining classes): also old, so e.g.
    U+11938 does not decompose and newer marks have combining class 0;
  * Rust std (char::is_whitespace, char::to_lowercase): the toolchain's Unicode, newer than
    utf8proc's, so newly encoded capital letters lowercase; to_lowercase is the *full* mapping
    (U+0130 -> "i\u0307"), utf8proc_tolower the simple one.
Parity means reproducing HF, not "correct" Unicode, so this tool asks HF itself, one code point
at a time, through its individual normalizer / pre-tokenizer building blocks, and records every
code point where the answer differs from the base rule the C++ code derives from utf8proc
(src/text/unicode_props.cc; the base rules below must stay identical to it). The recorded values
are absolute (HF's answer), not toggles.

tools/tokenizer_unicode_audit.py then checks the end result: every code point, in context,
through the full C++ tokenizer against the full HF tokenizer.

Usage: .venv/bin/python tools/gen_unicode_overrides.py [--out src/text/unicode_overrides.cc]
Needs the `tokenizers` version pinned in tools/requirements.txt and libutf8proc (same library
the C++ build links).
"""

import argparse
import ctypes
import ctypes.util
import os
import sys

import tokenizers
from tokenizers import normalizers, pre_tokenizers

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_CP = 0x110000

# utf8proc_category_t values (utf8proc.h).
CAT_MN, CAT_PC, CAT_PO = 6, 12, 18
CAT_CC, CAT_CF, CAT_CS, CAT_CO = 26, 27, 28, 29
UTF8PROC_DECOMPOSE = 1 << 4

# Rust's char::is_whitespace (the White_Space property). Unchanged since Unicode 6.3.
RUST_WHITE_SPACE = frozenset(
    [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680]
    + list(range(0x2000, 0x200B))
    + [0x2028, 0x2029, 0x202F, 0x205F, 0x3000]
)
ASCII_PUNCT = frozenset(ord(c) for c in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def is_scalar(cp):
    return not 0xD800 <= cp <= 0xDFFF


class Utf8proc:
    """The few utf8proc calls the C++ base rules use, through ctypes."""

    class _Property(ctypes.Structure):
        # Only the leading fields are read; the struct is never allocated from Python.
        _fields_ = [("category", ctypes.c_int16), ("combining_class", ctypes.c_int16)]

    def __init__(self):
        name = ctypes.util.find_library("utf8proc") or "libutf8proc.so.2"
        self.lib = ctypes.CDLL(name)
        self.lib.utf8proc_get_property.restype = ctypes.POINTER(self._Property)
        self.lib.utf8proc_unicode_version.restype = ctypes.c_char_p
        self.lib.utf8proc_version.restype = ctypes.c_char_p
        self._buf = (ctypes.c_int32 * 32)()
        self._last = ctypes.c_int(0)

    def version(self):
        return self.lib.utf8proc_version().decode()

    def unicode_version(self):
        return self.lib.utf8proc_unicode_version().decode()

    def category(self, cp):
        return self.lib.utf8proc_get_property(cp).contents.category

    def ccc(self, cp):
        return self.lib.utf8proc_get_property(cp).contents.combining_class

    def nfd(self, cp):
        n = self.lib.utf8proc_decompose_char(cp, self._buf, 32, UTF8PROC_DECOMPOSE,
                                             ctypes.byref(self._last))
        assert 0 < n <= 32, (cp, n)
        return "".join(chr(self._buf[i]) for i in range(n))

    def tolower(self, cp):
        return chr(self.lib.utf8proc_tolower(cp))


# --- Base rules: must mirror BuildBaseInfo() in src/text/unicode_props.cc. -------------------

def base_control(u, cp):
    if cp in (0x09, 0x0A, 0x0D):
        return False
    return u.category(cp) in (CAT_CC, CAT_CF, CAT_CS, CAT_CO)


def base_bert_whitespace(cp):
    return cp in (0x09, 0x0A, 0x0D) or cp in RUST_WHITE_SPACE


def base_punct(u, cp):
    return cp in ASCII_PUNCT or CAT_PC <= u.category(cp) <= CAT_PO


def base_chinese(cp):
    # The ranges of is_chinese_char in HF's normalizers/bert.rs.
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B920 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


# --- HF probes ---------------------------------------------------------------------------------

class HfProbe:
    """Asks HF's own building blocks about one code point."""

    def __init__(self):
        self.clean = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False,
                                                strip_accents=False, lowercase=False)
        self.chinese = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=True,
                                                  strip_accents=False, lowercase=False)
        self.strip = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False,
                                                strip_accents=True, lowercase=False)
        self.nfd_norm = normalizers.NFD()
        self.lower = normalizers.Lowercase()
        self.pre = pre_tokenizers.BertPreTokenizer()

    def nfd(self, s):
        return self.nfd_norm.normalize_str(s)


def ranges(values):
    """[(cp, value)] sorted by cp -> [(first, last, value)] merging runs of equal value."""
    out = []
    for cp, v in values:
        if out and out[-1][1] == cp - 1 and out[-1][2] == v:
            out[-1][1] = cp
        else:
            out.append([cp, cp, v])
    return out


def collect(u, hf):
    control, bert_ws, white, punct, chinese, mn, ccc, decomp, lower = ([] for _ in range(9))
    for cp in range(MAX_CP):
        if not is_scalar(cp):
            continue
        c = chr(cp)

        # clean_text: "" = dropped (control, NUL, U+FFFD), " " = BERT whitespace.
        cleaned = hf.clean.normalize_str(c)
        if cp not in (0, 0xFFFD):
            hf_control = cleaned == ""
            if hf_control != base_control(u, cp):
                control.append((cp, hf_control))
            if not hf_control:
                hf_ws = cleaned == " "
                assert hf_ws or cleaned == c, (hex(cp), cleaned)
                if hf_ws != base_bert_whitespace(cp):
                    bert_ws.append((cp, hf_ws))

        hf_chinese = hf.chinese.normalize_str(c) == f" {c} "
        if hf_chinese != base_chinese(cp):
            chinese.append((cp, hf_chinese))

        # Pre-tokenizer: whitespace splits and is dropped, punctuation is isolated.
        pieces = [p for p, _ in hf.pre.pre_tokenize_str("a" + c + "a")]
        hf_white = pieces == ["a", "a"]
        hf_punct = pieces == ["a", c, "a"]
        assert hf_white or hf_punct or pieces == ["a" + c + "a"], (hex(cp), pieces)
        if hf_white != (cp in RUST_WHITE_SPACE):
            white.append((cp, hf_white))
        if hf_punct != base_punct(u, cp):
            punct.append((cp, hf_punct))

        hf_nfd = hf.nfd(c)
        if hf_nfd != u.nfd(cp):
            decomp.append((cp, hf_nfd))
        if hf_nfd == c:
            # Only code points that survive NFD are ever tested for Mn or ordered by class.
            hf_mn = hf.strip.normalize_str(c) == ""
            if hf_mn != (u.category(cp) == CAT_MN):
                mn.append((cp, hf_mn))
            # Canonical classes never change once assigned, so HF's class is either utf8proc's
            # or 0 (a mark its older tables do not know). Probe which: a class > 1 mark is moved
            # behind U+0334 (class 1); a class 1 mark is moved in front of U+0301 (class 230).
            base = u.ccc(cp)
            if cp != 0x0334 and hf.nfd("a" + c + "\u0334") == "a\u0334" + c:
                hf_ccc = base if base > 1 else -1
            elif cp != 0x0301 and hf.nfd("a\u0301" + c) == "a" + c + "\u0301":
                hf_ccc = 1 if base == 1 else -1
            else:
                hf_ccc = 0 if cp not in (0x0334, 0x0301) else base
            if hf_ccc == -1:
                sys.exit(f"U+{cp:04X}: HF orders it with a combining class utf8proc does not "
                         f"have ({base}); extend the probe")
            if hf_ccc != base:
                ccc.append((cp, hf_ccc))

        hf_lower = hf.lower.normalize_str(c)
        if hf_lower != u.tolower(cp):
            lower.append((cp, hf_lower))
    return dict(control=control, bert_ws=bert_ws, white=white, punct=punct, chinese=chinese,
                mn=mn, ccc=ccc, decomp=decomp, lower=lower)


def cxx_u32(s):
    return 'U"' + "".join(f"\\U{ord(ch):08X}" for ch in s) + '"'


def emit_ranges(name, what, values, value_fmt):
    rs = ranges(values)
    lines = [f"// {what}: {len(values)} code points."]
    if not rs:
        lines.append(f"constinit const std::span<const {name[1]}> {name[0]}{{}};")
        return "\n".join(lines)
    lines.append(f"constexpr {name[1]} {name[0]}Data[] = {{")
    for first, last, v in rs:
        lines.append(f"    {{0x{first:04X}, 0x{last:04X}, {value_fmt(v)}}},")
    lines.append("};")
    lines.append(f"constinit const std::span<const {name[1]}> {name[0]}{{{name[0]}Data}};")
    return "\n".join(lines)


def emit_mappings(name, what, values):
    lines = [f"// {what}: {len(values)} code points."]
    if not values:
        lines.append(f"constinit const std::span<const MappingOverride> {name}{{}};")
        return "\n".join(lines)
    lines.append(f"constexpr MappingOverride {name}Data[] = {{")
    for cp, s in values:
        lines.append(f"    {{0x{cp:04X}, {cxx_u32(s)}}},")
    lines.append("};")
    lines.append(f"constinit const std::span<const MappingOverride> {name}{{{name}Data}};")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "src/text/unicode_overrides.cc"))
    args = ap.parse_args()

    u = Utf8proc()
    d = collect(u, HfProbe())
    b = lambda v: "true" if v else "false"  # noqa: E731
    parts = [
        emit_ranges(("kControl", "BoolRange"),
                    "clean_text drops it (HF is_other), unlike utf8proc's Cc/Cf/Co/Cs",
                    d["control"], b),
        emit_ranges(("kBertWhitespace", "BoolRange"),
                    "clean_text turns it into ' ' (HF is_whitespace)", d["bert_ws"], b),
        emit_ranges(("kWhiteSpace", "BoolRange"),
                    "BertPreTokenizer splits on it (Rust char::is_whitespace)", d["white"], b),
        emit_ranges(("kPunctuation", "BoolRange"),
                    "BertPreTokenizer isolates it (ASCII punctuation or HF is_punctuation)",
                    d["punct"], b),
        emit_ranges(("kChinese", "BoolRange"), "handle_chinese_chars pads it with spaces",
                    d["chinese"], b),
        emit_ranges(("kNonspacingMark", "BoolRange"),
                    "strip_accents drops it after NFD (HF is_mark_nonspacing)", d["mn"], b),
        emit_ranges(("kCombiningClass", "CccRange"),
                    "canonical combining class HF's NFD orders it by", d["ccc"], str),
        emit_mappings("kDecomposition", "HF's full canonical decomposition (NFD)", d["decomp"]),
        emit_mappings("kLowercase", "HF's lowercase (Rust char::to_lowercase, full mapping)",
                      d["lower"]),
    ]
    header = f"""\
// GENERATED by tools/gen_unicode_overrides.py -- do not edit; rerun the tool instead.
//
// The code points where Hugging Face `tokenizers` {tokenizers.__version__} disagrees with
// utf8proc {u.version()} (Unicode {u.unicode_version()}) on a property the BERT normalizer or
// pre-tokenizer uses. HF's Rust crates froze older (or, for Rust std, newer) Unicode versions
// than utf8proc's; parity means reproducing HF's answers, so unicode_props.cc applies these on
// top of utf8proc. Values are absolute (HF's answer). See the tool's docstring for details.
#include "text/unicode_overrides.h"

namespace tailcut::unicode_overrides {{

constinit const std::string_view kHfTokenizersVersion = "{tokenizers.__version__}";
constinit const std::string_view kUtf8procUnicodeVersion = "{u.unicode_version()}";
"""
    # One entry per line reads and diffs better than clang-format's packing.
    body = "// clang-format off\n" + "\n\n".join(parts) + "\n// clang-format on"
    text = header + "\n" + body + "\n\n}  // namespace tailcut::unicode_overrides\n"
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    for k, v in d.items():
        print(f"{k}: {len(v)} overrides")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
