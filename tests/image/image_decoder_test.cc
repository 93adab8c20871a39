#include "image/image_decoder.h"

#include <gtest/gtest.h>
#include <png.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tests/image/test_images.h"

namespace tailcut {
namespace {

using testing::AsBytes;
using testing::Contains;
using testing::EncodeJpeg;
using testing::EncodePng;
using testing::JpegEncodeOptions;
using testing::MakePattern;
using testing::MaxAbsDiff;
using testing::PngEncodeOptions;

// Decodes and expects success, reporting the status otherwise.
DecodedImage MustDecode(std::span<const std::byte> encoded, const ImageDecodeLimits& limits = {}) {
  Result<DecodedImage> image = DecodeImage(encoded, limits);
  EXPECT_TRUE(image.ok()) << image.status().ToString();
  return image.ok() ? std::move(image).value() : DecodedImage{};
}

// Decodes and expects InvalidArgument; returns the message.
std::string MustFail(std::span<const std::byte> encoded, const ImageDecodeLimits& limits = {}) {
  Result<DecodedImage> image = DecodeImage(encoded, limits);
  EXPECT_FALSE(image.ok()) << "decoded " << encoded.size() << " bytes as " << image->width << " x "
                           << image->height;
  if (image.ok()) return "";
  EXPECT_EQ(image.status().code(), Status::Code::kInvalidArgument) << image.status().ToString();
  return image.status().message();
}

// Mean absolute difference, for lossy round trips.
double MeanAbsDiff(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  double total = 0;
  for (size_t i = 0; i < a.size(); ++i) total += std::abs(int{a[i]} - int{b[i]});
  return a.empty() ? 0 : total / static_cast<double>(a.size());
}

// Each of a grey image's samples repeated three times, as the decoder's RGB has it.
std::vector<uint8_t> GreyToRgb(std::span<const uint8_t> grey) {
  std::vector<uint8_t> rgb;
  for (uint8_t v : grey) rgb.insert(rgb.end(), {v, v, v});
  return rgb;
}

// The first three of every `channels` samples.
std::vector<uint8_t> DropAlpha(std::span<const uint8_t> pixels, int channels) {
  std::vector<uint8_t> rgb;
  for (size_t i = 0; i < pixels.size(); i += channels) {
    rgb.insert(rgb.end(), pixels.begin() + i, pixels.begin() + i + 3);
  }
  return rgb;
}

// JPEG ----------------------------------------------------------------------------------------

TEST(JpegDecodeTest, RgbRoundTripKeepsSizeAndColoursWithinJpegTolerance) {
  for (bool subsample_chroma : {false, true}) {
    for (auto [width, height] : {std::pair{64, 48}, {1, 1}, {17, 5}, {5, 33}}) {
      SCOPED_TRACE(std::to_string(width) + " x " + std::to_string(height) +
                   (subsample_chroma ? ", 4:2:0" : ", 4:4:4"));
      const std::vector<uint8_t> rgb = MakePattern(width, height, 3);
      JpegEncodeOptions options;
      options.subsample_chroma = subsample_chroma;
      const DecodedImage image = MustDecode(EncodeJpeg(rgb, width, height, options));
      EXPECT_EQ(image.width, width);
      EXPECT_EQ(image.height, height);
      ASSERT_EQ(image.rgb.size(), rgb.size());
      if (subsample_chroma) {
        // Half-resolution chroma blurs the pattern's colour edges (up to ~60 levels there).
        EXPECT_LT(MeanAbsDiff(image.rgb, rgb), 10.0);
      } else {
        // Quality 95, full-resolution chroma: quantisation only (measured max 5, mean 0.8).
        EXPECT_LE(MaxAbsDiff(image.rgb, rgb), 8);
        EXPECT_LT(MeanAbsDiff(image.rgb, rgb), 1.5);
      }
    }
  }
}

TEST(JpegDecodeTest, GreyscaleBecomesRgbWithEqualChannels) {
  const std::vector<uint8_t> grey = MakePattern(40, 30, 1);
  JpegEncodeOptions options;
  options.color_space = JCS_GRAYSCALE;
  const DecodedImage image = MustDecode(EncodeJpeg(grey, 40, 30, options));
  ASSERT_EQ(image.rgb.size(), 40u * 30 * 3);
  for (size_t i = 0; i < image.rgb.size(); i += 3) {
    ASSERT_EQ(image.rgb[i], image.rgb[i + 1]);
    ASSERT_EQ(image.rgb[i], image.rgb[i + 2]);
  }
  EXPECT_LE(MaxAbsDiff(image.rgb, GreyToRgb(grey)), 4);
}

TEST(JpegDecodeTest, CmykBecomesRgbWithAdobePolarity) {
  // Stored inverted (Adobe): 255 is no ink. White, cyan, magenta+yellow (red), and black (K).
  const std::vector<std::pair<std::vector<uint8_t>, std::vector<uint8_t>>> cases = {
      {{255, 255, 255, 255}, {255, 255, 255}},
      {{0, 255, 255, 255}, {0, 255, 255}},
      {{255, 0, 0, 255}, {255, 0, 0}},
      {{255, 255, 255, 0}, {0, 0, 0}},
  };
  for (const auto& [cmyk, rgb] : cases) {
    std::vector<uint8_t> pixels;
    for (int i = 0; i < 16 * 16; ++i) pixels.insert(pixels.end(), cmyk.begin(), cmyk.end());
    JpegEncodeOptions options;
    options.color_space = JCS_CMYK;
    const DecodedImage image = MustDecode(EncodeJpeg(pixels, 16, 16, options));
    ASSERT_EQ(image.rgb.size(), 16u * 16 * 3);
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(image.rgb[(8 * 16 + 8) * 3 + c], rgb[c], 3) << "channel " << c;
    }
  }
}

TEST(JpegDecodeTest, ProgressiveDecodesAndTheScanLimitRefusesIt) {
  const std::vector<uint8_t> rgb = MakePattern(64, 48, 3);
  JpegEncodeOptions options;
  options.progressive = true;
  const std::vector<std::byte> jpeg = EncodeJpeg(rgb, 64, 48, options);
  const DecodedImage image = MustDecode(jpeg);
  EXPECT_LE(MaxAbsDiff(image.rgb, rgb), 8);
  // jpeg_simple_progression writes 10 scans for colour images.
  ImageDecodeLimits limits;
  limits.max_jpeg_scans = 4;
  EXPECT_TRUE(Contains(MustFail(jpeg, limits), "more than 4 scans"));
  limits.max_jpeg_scans = 10;
  MustDecode(jpeg, limits);
}

// PNG -----------------------------------------------------------------------------------------

TEST(PngDecodeTest, RgbRoundTripIsExact) {
  for (bool interlaced : {false, true}) {
    for (auto [width, height] : {std::pair{64, 48}, {1, 1}, {13, 7}}) {
      SCOPED_TRACE(std::to_string(width) + " x " + std::to_string(height) +
                   (interlaced ? " interlaced" : ""));
      const std::vector<uint8_t> rgb = MakePattern(width, height, 3);
      PngEncodeOptions options;
      options.interlaced = interlaced;
      const DecodedImage image = MustDecode(EncodePng(rgb, width, height, options));
      EXPECT_EQ(image.width, width);
      EXPECT_EQ(image.height, height);
      EXPECT_EQ(image.rgb, rgb);
    }
  }
}

TEST(PngDecodeTest, GreyBecomesRgb) {
  const std::vector<uint8_t> grey = MakePattern(21, 9, 1);
  PngEncodeOptions options;
  options.color_type = PNG_COLOR_TYPE_GRAY;
  EXPECT_EQ(MustDecode(EncodePng(grey, 21, 9, options)).rgb, GreyToRgb(grey));
}

TEST(PngDecodeTest, OneBitGreyExpandsToBlackAndWhite) {
  // 10 pixels a row, 1 bit each: 1010101010 then padding; one row of each phase.
  const std::vector<uint8_t> packed = {0xAA, 0x80, 0x55, 0x40};
  PngEncodeOptions options;
  options.color_type = PNG_COLOR_TYPE_GRAY;
  options.bit_depth = 1;
  const DecodedImage image = MustDecode(EncodePng(packed, 10, 2, options));
  ASSERT_EQ(image.rgb.size(), 10u * 2 * 3);
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 10; ++x) {
      const uint8_t expected = (x + y) % 2 == 0 ? 255 : 0;
      EXPECT_EQ(image.rgb[(y * 10 + x) * 3], expected) << x << ", " << y;
    }
  }
}

TEST(PngDecodeTest, AlphaIsDroppedNotComposited) {
  const std::vector<uint8_t> rgba = MakePattern(30, 20, 4);
  PngEncodeOptions options;
  options.color_type = PNG_COLOR_TYPE_RGBA;
  EXPECT_EQ(MustDecode(EncodePng(rgba, 30, 20, options)).rgb, DropAlpha(rgba, 4));

  const std::vector<uint8_t> grey_alpha = MakePattern(30, 20, 2);
  options.color_type = PNG_COLOR_TYPE_GRAY_ALPHA;
  std::vector<uint8_t> grey;
  for (size_t i = 0; i < grey_alpha.size(); i += 2) grey.push_back(grey_alpha[i]);
  EXPECT_EQ(MustDecode(EncodePng(grey_alpha, 30, 20, options)).rgb, GreyToRgb(grey));
}

TEST(PngDecodeTest, PaletteWithTransparencyBecomesItsRgbEntries) {
  PngEncodeOptions options;
  options.color_type = PNG_COLOR_TYPE_PALETTE;
  options.palette_rgb = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30};
  options.palette_alpha = {0, 128};  // Entry 0 transparent, 1 half: still only RGB comes out.
  std::vector<uint8_t> indices(8 * 4);
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<uint8_t>(i % 4);
  const DecodedImage image = MustDecode(EncodePng(indices, 8, 4, options));
  ASSERT_EQ(image.rgb.size(), indices.size() * 3);
  for (size_t i = 0; i < indices.size(); ++i) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(image.rgb[i * 3 + c], options.palette_rgb[indices[i] * 3 + c]) << i;
    }
  }
}

TEST(PngDecodeTest, SixteenBitSamplesKeepTheirHighByte) {
  // RGB and grey, 16 bits a sample, big-endian: the high byte is the pattern, the low byte
  // noise that must not leak into the result.
  for (int color_type : {PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_RGBA}) {
    SCOPED_TRACE(color_type);
    const int channels = color_type == PNG_COLOR_TYPE_RGB    ? 3
                         : color_type == PNG_COLOR_TYPE_GRAY ? 1
                                                             : 4;
    const std::vector<uint8_t> high = MakePattern(12, 10, channels);
    std::vector<uint8_t> wide;
    for (size_t i = 0; i < high.size(); ++i) {
      wide.insert(wide.end(), {high[i], static_cast<uint8_t>(i * 37)});
    }
    PngEncodeOptions options;
    options.color_type = color_type;
    options.bit_depth = 16;
    const std::vector<uint8_t> expected =
        channels == 1 ? GreyToRgb(high) : DropAlpha(high, channels);
    EXPECT_EQ(MustDecode(EncodePng(wide, 12, 10, options)).rgb, expected);
  }
}

// Bad input -----------------------------------------------------------------------------------

TEST(ImageDecodeErrorTest, EmptyInput) {
  EXPECT_TRUE(Contains(MustFail({}), "empty"));
}

TEST(ImageDecodeErrorTest, UnknownFormatsNameTheAcceptedOnes) {
  std::mt19937 random(7);
  std::vector<std::byte> noise(4096);
  for (std::byte& b : noise) b = std::byte(random() & 0xFF);
  noise[0] = std::byte{0x00};  // Not by chance a JPEG (FF D8 FF) or PNG (89 50 4E 47).
  for (const std::vector<std::byte>& input :
       {noise, AsBytes("just some text, not an image\n"), AsBytes("GIF89a\x01\x00\x01\x00"),
        AsBytes("\xFF\xD8"), AsBytes("\x89PNG")}) {
    const std::string message = MustFail(input);
    EXPECT_TRUE(Contains(message, "not a JPEG or PNG"));
    EXPECT_TRUE(Contains(message, "accepted formats: JPEG, PNG"));
  }
}

TEST(ImageDecodeErrorTest, TruncatedJpegIsAnErrorNotAGreyImage) {
  const std::vector<std::byte> jpeg = EncodeJpeg(MakePattern(64, 48, 3), 64, 48);
  const std::vector<std::byte> half(jpeg.begin(), jpeg.begin() + jpeg.size() / 2);
  EXPECT_TRUE(Contains(MustFail(half), "Premature end of JPEG file"));
}

TEST(ImageDecodeErrorTest, TruncatedPng) {
  const std::vector<std::byte> png = EncodePng(MakePattern(64, 48, 3), 64, 48);
  const std::vector<std::byte> half(png.begin(), png.begin() + png.size() / 2);
  EXPECT_TRUE(Contains(MustFail(half), "the data is truncated"));
}

TEST(ImageDecodeErrorTest, EveryPrefixOfAValidFileIsRefused) {
  // Cut anywhere, down to losing only the end marker: never a partial image.
  JpegEncodeOptions progressive;
  progressive.progressive = true;
  PngEncodeOptions interlaced;
  interlaced.interlaced = true;
  const std::vector<uint8_t> rgb = MakePattern(24, 16, 3);
  for (const std::vector<std::byte>& file :
       {EncodeJpeg(rgb, 24, 16), EncodeJpeg(rgb, 24, 16, progressive), EncodePng(rgb, 24, 16),
        EncodePng(rgb, 24, 16, interlaced)}) {
    MustDecode(file);
    for (size_t size = 1; size < file.size(); ++size) {
      Result<DecodedImage> image = DecodeImage(std::span(file).first(size));
      ASSERT_FALSE(image.ok()) << "a " << size << "-byte prefix of " << file.size() << " decoded";
      ASSERT_EQ(image.status().code(), Status::Code::kInvalidArgument);
    }
  }
}

TEST(ImageDecodeErrorTest, CorruptPngChecksumIsRefused) {
  std::vector<std::byte> png = EncodePng(MakePattern(32, 32, 3), 32, 32);
  png[png.size() - 20] ^= std::byte{0x01};  // Inside the last IDAT's data or CRC.
  EXPECT_TRUE(Contains(MustFail(png), "PNG data is corrupt"));
}

TEST(ImageDecodeErrorTest, RandomDamageNeverCrashes) {
  // Whatever the damage, the answer is an image of the declared size or InvalidArgument (run
  // under ASan, this is where a decoder's memory error would show).
  std::mt19937 random(11);
  const std::vector<uint8_t> rgb = MakePattern(32, 24, 3);
  for (const std::vector<std::byte>& file : {EncodeJpeg(rgb, 32, 24), EncodePng(rgb, 32, 24)}) {
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<std::byte> damaged = file;
      for (int flips = 1 + trial % 4; flips > 0; --flips) {
        // Past the signature, so that each trial reaches a decoder.
        damaged[8 + random() % (damaged.size() - 8)] = std::byte(random() & 0xFF);
      }
      Result<DecodedImage> image = DecodeImage(damaged);
      if (image.ok()) {
        EXPECT_EQ(image->rgb.size(), static_cast<size_t>(image->width) * image->height * 3);
      } else {
        EXPECT_EQ(image.status().code(), Status::Code::kInvalidArgument);
      }
    }
  }
}

TEST(ImageDecodeLimitTest, HugeDeclaredPngIsRefusedFastWithItsSize) {
  const std::vector<std::byte> header = testing::PngHeaderOnly(50'000, 50'000);
  const auto start = std::chrono::steady_clock::now();
  const std::string message = MustFail(header);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(Contains(message, "50000 x 50000"));
  EXPECT_TRUE(Contains(message, "too large"));
  // Microseconds in practice; the bound leaves room for a loaded or sanitizer-built run while
  // still failing if 7.5 GB of pixels were allocated and touched.
  EXPECT_LT(elapsed, std::chrono::milliseconds(50));
}

TEST(ImageDecodeLimitTest, ZeroSizeIsRefused) {
  EXPECT_TRUE(Contains(MustFail(testing::PngHeaderOnly(0, 10)), "empty size (0 x 10 pixels)"));
  EXPECT_TRUE(Contains(MustFail(testing::PngHeaderOnly(10, 0)), "empty size (10 x 0 pixels)"));

  // A JPEG whose frame header (SOF0: FF C0, length, precision, height, width) says height 0.
  std::vector<std::byte> jpeg = EncodeJpeg(MakePattern(8, 8, 3), 8, 8);
  for (size_t i = 0; i + 9 < jpeg.size(); ++i) {
    if (jpeg[i] == std::byte{0xFF} && jpeg[i + 1] == std::byte{0xC0}) {
      jpeg[i + 5] = std::byte{0};
      jpeg[i + 6] = std::byte{0};
      break;
    }
  }
  MustFail(jpeg);
}

TEST(ImageDecodeLimitTest, LimitsAreRespectedForBothFormats) {
  const std::vector<uint8_t> rgb = MakePattern(64, 48, 3);
  for (const std::vector<std::byte>& file : {EncodeJpeg(rgb, 64, 48), EncodePng(rgb, 64, 48)}) {
    ImageDecodeLimits limits;
    limits.max_pixels = 64 * 48;  // Exactly at the limit: accepted.
    MustDecode(file, limits);
    limits.max_pixels = 64 * 48 - 1;
    EXPECT_TRUE(Contains(MustFail(file, limits), "64 x 48 = 3072 pixels, the limit is 3071"));
    limits = {};
    limits.max_side_pixels = 64;
    MustDecode(file, limits);
    limits.max_side_pixels = 63;
    EXPECT_TRUE(Contains(MustFail(file, limits), "64 x 48 pixels, the limit is 63 pixels a side"));
  }
}

TEST(ImageDecodeLimitTest, HugeDeclaredJpegIsRefusedBeforeDecoding) {
  // Patch the frame header of a small JPEG to declare 60000 x 60000 (JPEG's own limit is
  // 65500): refused from the header, with the size.
  std::vector<std::byte> jpeg = EncodeJpeg(MakePattern(8, 8, 3), 8, 8);
  bool patched = false;
  for (size_t i = 0; i + 9 < jpeg.size() && !patched; ++i) {
    if (jpeg[i] == std::byte{0xFF} && jpeg[i + 1] == std::byte{0xC0}) {
      for (size_t at : {i + 5, i + 7}) {
        jpeg[at] = std::byte{60000 >> 8};
        jpeg[at + 1] = std::byte{60000 & 0xFF};
      }
      patched = true;
    }
  }
  ASSERT_TRUE(patched);
  EXPECT_TRUE(Contains(MustFail(jpeg), "60000 x 60000"));
}

}  // namespace
}  // namespace tailcut
