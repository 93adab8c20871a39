#include "text/utf8.h"

#include <cstring>

namespace tailcut {
namespace {

// Table 3-7 of the Unicode standard: the allowed range of the second byte depends on the lead
// byte (this is what excludes overlongs, surrogates and values above U+10FFFF); later
// continuation bytes are always 80..BF.
struct LeadInfo {
  uint8_t length;  // 0 = not a valid lead byte.
  uint8_t lo;
  uint8_t hi;
};

constexpr LeadInfo Lead(unsigned char b) {
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b >= 0xE1 && b <= 0xEC) return {3, 0x80, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xEE && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Returns the byte count, negated when the bytes are a maximal invalid subpart (then *cp is
// U+FFFD), so callers can tell a replacement from a literal U+FFFD in the input.
int Decode(const unsigned char* p, size_t n, char32_t* cp) {
  const unsigned char b0 = p[0];
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  const LeadInfo lead = Lead(b0);
  if (lead.length == 0) {
    *cp = kReplacementChar;
    return -1;
  }
  char32_t value = b0 & (0x7Fu >> lead.length);
  for (size_t k = 1; k < lead.length; ++k) {
    const unsigned char lo = k == 1 ? lead.lo : 0x80;
    const unsigned char hi = k == 1 ? lead.hi : 0xBF;
    if (k >= n || p[k] < lo || p[k] > hi) {
      // The bytes so far are a maximal invalid subpart (a prefix of a valid sequence that
      // cannot be completed): one replacement, and decoding resumes at p[k].
      *cp = kReplacementChar;
      return -static_cast<int>(k);
    }
    value = (value << 6) | (p[k] & 0x3Fu);
  }
  *cp = value;
  return lead.length;
}

}  // namespace

size_t DecodeUtf8Char(const unsigned char* p, size_t n, char32_t* cp) {
  const int len = Decode(p, n, cp);
  return static_cast<size_t>(len < 0 ? -len : len);
}

bool IsAscii(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  uint64_t acc = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    acc |= word;
  }
  for (; i < n; ++i) acc |= p[i];
  return (acc & 0x8080808080808080ull) == 0;
}

size_t FindNonAscii(std::string_view s, size_t pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = pos;
  for (; i + 8 <= n; i += 8) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    if (word & 0x8080808080808080ull) break;
  }
  for (; i < n; ++i) {
    if (p[i] >= 0x80) return i;
  }
  return n;
}

Utf8Scan ScanUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  // Eight bytes at a time while everything is ASCII: the common case for English requests.
  while (i + 8 <= n) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    if (word & 0x8080808080808080ull) break;
    i += 8;
  }
  Utf8Scan scan;
  while (i < n) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    scan.ascii = false;
    char32_t cp;
    const int len = Decode(p + i, n - i, &cp);
    if (len < 0) {
      scan.valid = false;
      return scan;
    }
    i += static_cast<size_t>(len);
  }
  return scan;
}

void AppendUtf8Replacing(std::string_view s, std::string& out) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  out.reserve(out.size() + n + 8);
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      out.push_back(static_cast<char>(p[i]));
      ++i;
      continue;
    }
    char32_t cp;
    const int len = Decode(p + i, n - i, &cp);
    if (len < 0) {
      out.append("\xEF\xBF\xBD");
      i += static_cast<size_t>(-len);
    } else {
      out.append(s.data() + i, static_cast<size_t>(len));
      i += static_cast<size_t>(len);
    }
  }
}

size_t EncodeUtf8(char32_t cp, char* out) {
  if (cp < 0x80) {
    out[0] = static_cast<char>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<char>(0xC0 | (cp >> 6));
    out[1] = static_cast<char>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<char>(0xE0 | (cp >> 12));
    out[1] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<char>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<char>(0xF0 | (cp >> 18));
  out[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<char>(0x80 | (cp & 0x3F));
  return 4;
}

}  // namespace tailcut
