#include "tests/image/test_images.h"

#include <png.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace tailcut::testing {

std::vector<uint8_t> MakePattern(int width, int height, int channels) {
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * channels);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const bool dark_cell = ((x / 16) + (y / 16)) % 2 == 1;
      for (int c = 0; c < channels; ++c) {
        int value = 0;
        switch (c % 4) {
          case 0:
            value = width > 1 ? 255 * x / (width - 1) : 128;
            break;
          case 1:
            value = height > 1 ? 255 * y / (height - 1) : 128;
            break;
          case 2:
            value = dark_cell ? 40 : 220;
            break;
          default:
            value = (x + y) * 255 / std::max(1, width + height - 2);
            break;
        }
        pixels[(static_cast<size_t>(y) * width + x) * channels + c] = static_cast<uint8_t>(value);
      }
    }
  }
  return pixels;
}

std::vector<std::byte> EncodeJpeg(std::span<const uint8_t> pixels, int width, int height,
                                  const JpegEncodeOptions& options) {
  jpeg_compress_struct info;
  jpeg_error_mgr error;
  info.err = jpeg_std_error(&error);  // Exits on error: only a bug in a test gets there.
  jpeg_create_compress(&info);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&info, &buffer, &size);
  info.image_width = static_cast<JDIMENSION>(width);
  info.image_height = static_cast<JDIMENSION>(height);
  info.in_color_space = options.color_space;
  info.input_components = options.color_space == JCS_GRAYSCALE ? 1
                          : options.color_space == JCS_CMYK    ? 4
                                                               : 3;
  if (pixels.size() != static_cast<size_t>(width) * height * info.input_components) {
    throw std::invalid_argument("EncodeJpeg: pixel buffer size does not match");
  }
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, options.quality, TRUE);
  if (!options.subsample_chroma) {
    for (int c = 0; c < info.num_components; ++c) {
      info.comp_info[c].h_samp_factor = 1;
      info.comp_info[c].v_samp_factor = 1;
    }
  }
  if (options.progressive) jpeg_simple_progression(&info);
  jpeg_start_compress(&info, TRUE);
  const size_t row_bytes = static_cast<size_t>(width) * info.input_components;
  while (info.next_scanline < info.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels.data()) + info.next_scanline * row_bytes;
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  std::vector<std::byte> out(reinterpret_cast<std::byte*>(buffer),
                             reinterpret_cast<std::byte*>(buffer) + size);
  std::free(buffer);
  return out;
}

namespace {

void AppendToVector(png_structp png, png_bytep data, size_t length) {
  auto* out = static_cast<std::vector<std::byte>*>(png_get_io_ptr(png));
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  out->insert(out->end(), bytes, bytes + length);
}

void NoFlush(png_structp) {}

int SamplesPerPixel(int color_type) {
  switch (color_type) {
    case PNG_COLOR_TYPE_GRAY:
    case PNG_COLOR_TYPE_PALETTE:
      return 1;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      return 2;
    case PNG_COLOR_TYPE_RGB:
      return 3;
    default:
      return 4;
  }
}

void AppendBigEndian32(std::vector<std::byte>& out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(std::byte(value >> shift));
}

}  // namespace

std::vector<std::byte> EncodePng(std::span<const uint8_t> pixels, int width, int height,
                                 const PngEncodeOptions& options) {
  const size_t row_bytes =
      (static_cast<size_t>(width) * SamplesPerPixel(options.color_type) * options.bit_depth + 7) /
      8;
  if (pixels.size() != row_bytes * height) {
    throw std::invalid_argument("EncodePng: pixel buffer size does not match");
  }
  std::vector<std::byte> out;
  // libpng's default error handling aborts: only a bug in a test gets there.
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(png, &out, AppendToVector, NoFlush);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height),
               options.bit_depth, options.color_type,
               options.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  std::vector<png_color> palette;
  for (size_t i = 0; i + 2 < options.palette_rgb.size(); i += 3) {
    palette.push_back(
        {options.palette_rgb[i], options.palette_rgb[i + 1], options.palette_rgb[i + 2]});
  }
  if (!palette.empty()) png_set_PLTE(png, info, palette.data(), static_cast<int>(palette.size()));
  if (!options.palette_alpha.empty()) {
    png_set_tRNS(png, info, options.palette_alpha.data(),
                 static_cast<int>(options.palette_alpha.size()), nullptr);
  }
  png_write_info(png, info);
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  for (int y = 0; y < height; ++y) {
    rows[y] = const_cast<png_bytep>(pixels.data() + y * row_bytes);
  }
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

std::vector<std::byte> PngHeaderOnly(uint32_t width, uint32_t height) {
  static constexpr uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<std::byte> out;
  for (uint8_t b : kSignature) out.push_back(std::byte{b});
  AppendBigEndian32(out, 13);
  const size_t type_at = out.size();
  for (char c : std::string_view("IHDR")) out.push_back(std::byte(c));
  AppendBigEndian32(out, width);
  AppendBigEndian32(out, height);
  // Bit depth 8, colour type 2 (RGB), compression 0, filter 0, no interlace.
  for (uint8_t b : {8, 2, 0, 0, 0}) out.push_back(std::byte{b});
  // The CRC covers the chunk type and data.
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(out.data() + type_at),
                          static_cast<uInt>(out.size() - type_at));
  AppendBigEndian32(out, static_cast<uint32_t>(crc));
  return out;
}

int MaxAbsDiff(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  int worst = a.size() == b.size() ? 0 : 256;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::abs(int{a[i]} - int{b[i]}));
  }
  return worst;
}

std::vector<std::byte> AsBytes(std::string_view text) {
  const auto* data = reinterpret_cast<const std::byte*>(text.data());
  return {data, data + text.size()};
}

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "\"" << text << "\"\n  does not contain\n\"" << part << "\"";
}

}  // namespace tailcut::testing
