// UTF-8 decoding and encoding for the tokenizer.
//
// Decoding never fails: each *maximal invalid subpart* (Unicode 15, section 3.9, "U+FFFD
// Substitution of Maximal Subparts") becomes one U+FFFD, which is exactly what Python's
// bytes.decode("utf-8", "replace") does, so a request with broken bytes tokenizes the same as
// the Python reference that decodes first. Surrogate code points (ED A0..BF xx) are invalid.
//
// Thread-safety: pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tailcut {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes one code point from the non-empty byte range [p, p + n). Returns the number of bytes
// consumed (1..4) and stores the code point, or U+FFFD for a maximal invalid subpart, in *cp.
size_t DecodeUtf8Char(const unsigned char* p, size_t n, char32_t* cp);

struct Utf8Scan {
  bool valid = true;  // Well-formed UTF-8 throughout.
  bool ascii = true;  // Every byte < 0x80 (implies valid).
};

// One pass over `s` answering both questions (the ASCII check is the common fast exit).
Utf8Scan ScanUtf8(std::string_view s);

// True when every byte is < 0x80.
bool IsAscii(std::string_view s);

// Offset of the first byte >= 0x80 at or after `pos`, or s.size().
size_t FindNonAscii(std::string_view s, size_t pos);

// Appends `s` to `out`, each maximal invalid subpart replaced by U+FFFD (EF BF BD).
void AppendUtf8Replacing(std::string_view s, std::string& out);

// Encodes `cp` (a Unicode scalar value) into out[0..3]; returns the byte count.
size_t EncodeUtf8(char32_t cp, char* out);

// Appends the UTF-8 encoding of `cp`.
inline void AppendUtf8(char32_t cp, std::string& out) {
  char buf[4];
  out.append(buf, EncodeUtf8(cp, buf));
}

// Decodes the code point starting at s[*i] of *well-formed* UTF-8 and advances *i past it.
// Callers guarantee validity (ScanUtf8 / AppendUtf8Replacing ran first); no checks here.
inline char32_t DecodeValidUtf8(std::string_view s, size_t* i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + *i;
  const unsigned char b0 = p[0];
  if (b0 < 0x80) {
    *i += 1;
    return b0;
  }
  if (b0 < 0xE0) {
    *i += 2;
    return (char32_t{b0 & 0x1Fu} << 6) | (p[1] & 0x3Fu);
  }
  if (b0 < 0xF0) {
    *i += 3;
    return (char32_t{b0 & 0x0Fu} << 12) | (char32_t{p[1] & 0x3Fu} << 6) | (p[2] & 0x3Fu);
  }
  *i += 4;
  return (char32_t{b0 & 0x07u} << 18) | (char32_t{p[1] & 0x3Fu} << 12) |
         (char32_t{p[2] & 0x3Fu} << 6) | (p[3] & 0x3Fu);
}

}  // namespace tailcut
