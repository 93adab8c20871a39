// Helpers for the image module's tests: images made in the test itself (synthetic pixel
// patterns, encoded with libjpeg and libpng, the encoders of the decoders' own libraries;
// hand-built PNG headers for sizes no encoder would write) and a substring assertion.
//
// Thread-safety: test-only pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdio>
// After <cstddef> and <cstdio>: jpeglib.h uses size_t and FILE without declaring them.
#include <gtest/gtest.h>
#include <jpeglib.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tailcut::testing {

// A deterministic width x height image with `channels` interleaved 8-bit samples: smooth
// gradients plus a coarse checkerboard, so it compresses well and every channel differs.
std::vector<uint8_t> MakePattern(int width, int height, int channels);

struct JpegEncodeOptions {
  int quality = 95;
  // JCS_RGB (3 components), JCS_GRAYSCALE (1) or JCS_CMYK (4, stored inverted as Adobe's
  // encoders do; libjpeg writes it as YCCK with an Adobe marker).
  J_COLOR_SPACE color_space = JCS_RGB;
  bool progressive = false;
  // 4:2:0 chroma subsampling (libjpeg's default); off, every component keeps full resolution
  // and the round trip's error is the quantisation's alone.
  bool subsample_chroma = false;
};

// Encodes `pixels` (width * height * components bytes) with libjpeg.
std::vector<std::byte> EncodeJpeg(std::span<const uint8_t> pixels, int width, int height,
                                  const JpegEncodeOptions& options = {});

struct PngEncodeOptions {
  int color_type = 2;  // PNG_COLOR_TYPE_*: 0 grey, 2 RGB, 3 palette, 4 grey+alpha, 6 RGBA.
  int bit_depth = 8;   // 1, 2, 4, 8 or 16; 16-bit samples are big-endian pairs in `pixels`.
  bool interlaced = false;
  std::vector<uint8_t> palette_rgb;    // For palette images: 3 bytes an entry.
  std::vector<uint8_t> palette_alpha;  // A tRNS chunk for palette images, one byte an entry.
};

// Encodes `pixels` (rows packed as PNG stores them: width * samples * bit_depth / 8 bytes,
// rounded up, a row) with libpng.
std::vector<std::byte> EncodePng(std::span<const uint8_t> pixels, int width, int height,
                                 const PngEncodeOptions& options = {});

// The signature and an IHDR chunk (8-bit RGB, correct CRC) declaring width x height, with no
// pixel data after it: what an attacker sends to make a decoder allocate.
std::vector<std::byte> PngHeaderOnly(uint32_t width, uint32_t height);

// Largest absolute difference between two equally long byte sequences.
int MaxAbsDiff(std::span<const uint8_t> a, std::span<const uint8_t> b);

std::vector<std::byte> AsBytes(std::string_view text);

// gmock is not installed on every build machine (tests/config/config_test_util.h), so
// substring checks are done by hand: EXPECT_TRUE(Contains(message, "part")).
::testing::AssertionResult Contains(const std::string& text, const std::string& part);

}  // namespace tailcut::testing
