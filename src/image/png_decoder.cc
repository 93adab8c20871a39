// PNG decoding with libpng, to 8-bit RGB.
//
// The size comes from the IHDR chunk at its fixed offset, checked before libpng even starts,
// so an oversized image is refused in microseconds. libpng reports errors by longjmp to the
// setjmp in ReadHeader / ReadPixels (the error callback also keeps the message and prints
// nothing). longjmp skips destructors, so those two functions hold nothing but raw pointers:
// the C++ objects (pixels, row pointers) live in DecodePng's frame and are allocated between
// the two protected steps.
//
// Transforms (none of them applies gamma or colour management, as Pillow applies none):
// palette -> RGB, grey (1..16 bits) -> RGB, 16-bit samples -> their high byte (what Pillow's
// RGB;16B unpacker keeps), alpha and tRNS transparency dropped (Pillow's convert("RGB") drops
// them too, rather than compositing).
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "image/image_formats.h"

namespace tailcut::image_internal {
namespace {

// The signature (8 bytes), then the IHDR chunk: length (4), type (4), width (4), height (4).
constexpr size_t kIhdrTypeOffset = 12;
constexpr size_t kIhdrWidthOffset = 16;
constexpr size_t kIhdrHeightOffset = 20;
constexpr size_t kIhdrSizeEnd = 24;

uint32_t ReadBigEndian32(std::span<const std::byte> bytes, size_t offset) {
  return (static_cast<uint32_t>(bytes[offset]) << 24) |
         (static_cast<uint32_t>(bytes[offset + 1]) << 16) |
         (static_cast<uint32_t>(bytes[offset + 2]) << 8) | static_cast<uint32_t>(bytes[offset + 3]);
}

// What the libpng callbacks reach through png_get_error_ptr / png_get_io_ptr.
struct PngReader {
  png_structp png;
  png_infop info;
  const unsigned char* data;
  size_t size;
  size_t offset;
  char message[200];
};

[[noreturn]] void OnError(png_structp png, png_const_charp message) {
  auto* reader = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(reader->message, sizeof(reader->message), "%s", message);
  png_longjmp(png, 1);
}

// Warnings (a bad CRC in an ancillary chunk, an unknown chunk) leave the pixels intact.
void OnWarning(png_structp, png_const_charp) {}

void ReadFromMemory(png_structp png, png_bytep out, size_t length) {
  auto* reader = static_cast<PngReader*>(png_get_io_ptr(png));
  if (length > reader->size - reader->offset) png_error(png, "the data is truncated");
  std::memcpy(out, reader->data + reader->offset, length);
  reader->offset += length;
}

// The decoded layout once the transforms are set; filled in by ReadHeader.
struct PngLayout {
  uint32_t width;
  uint32_t height;
  int channels;
  int bit_depth;
  size_t row_bytes;
};

// Protected step 1: read the chunks up to the pixel data and set up the transforms to 8-bit
// RGB. Only raw pointers in this frame (see the file comment).
bool ReadHeader(PngReader* reader, png_uint_32 max_side_pixels, PngLayout* layout) {
  if (setjmp(png_jmpbuf(reader->png)) != 0) return false;
  png_set_read_fn(reader->png, reader, ReadFromMemory);
  // Already checked from the IHDR bytes; this keeps libpng's own limit (1,000,000) in line.
  png_set_user_limits(reader->png, max_side_pixels, max_side_pixels);
  png_read_info(reader->png, reader->info);

  const int color_type = png_get_color_type(reader->png, reader->info);
  const int bit_depth = png_get_bit_depth(reader->png, reader->info);
  if (bit_depth == 16) png_set_strip_16(reader->png);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(reader->png);
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) {
    png_set_expand_gray_1_2_4_to_8(reader->png);
  }
  if (color_type == PNG_COLOR_TYPE_GRAY || color_type == PNG_COLOR_TYPE_GRAY_ALPHA) {
    png_set_gray_to_rgb(reader->png);
  }
  // Also stops png_set_palette_to_rgb from turning a tRNS chunk into an alpha channel.
  if ((color_type & PNG_COLOR_MASK_ALPHA) != 0 ||
      png_get_valid(reader->png, reader->info, PNG_INFO_tRNS) != 0) {
    png_set_strip_alpha(reader->png);
  }
  png_set_interlace_handling(reader->png);
  png_read_update_info(reader->png, reader->info);

  layout->width = png_get_image_width(reader->png, reader->info);
  layout->height = png_get_image_height(reader->png, reader->info);
  layout->channels = png_get_channels(reader->png, reader->info);
  layout->bit_depth = png_get_bit_depth(reader->png, reader->info);
  layout->row_bytes = png_get_rowbytes(reader->png, reader->info);
  return true;
}

// Protected step 2: decode every row (all passes of an interlaced file), then read the chunks
// after the pixel data, so a file cut short anywhere (even just its IEND) is an error.
bool ReadPixels(PngReader* reader, png_bytepp rows) {
  if (setjmp(png_jmpbuf(reader->png)) != 0) return false;
  png_read_image(reader->png, rows);
  png_read_end(reader->png, nullptr);
  return true;
}

// Destroys the libpng structures however DecodePng returns.
class ReaderGuard {
 public:
  explicit ReaderGuard(PngReader* reader) : reader_(reader) {}
  ~ReaderGuard() {
    if (reader_->png != nullptr) {
      png_destroy_read_struct(&reader_->png, reader_->info != nullptr ? &reader_->info : nullptr,
                              nullptr);
    }
  }
  ReaderGuard(const ReaderGuard&) = delete;
  ReaderGuard& operator=(const ReaderGuard&) = delete;

 private:
  PngReader* reader_;
};

Status CorruptPng(const PngReader& reader) {
  return Status::InvalidArgument(std::string("PNG data is corrupt, truncated or unsupported: ") +
                                 reader.message);
}

}  // namespace

Result<DecodedImage> DecodePng(std::span<const std::byte> encoded,
                               const ImageDecodeLimits& limits) {
  if (encoded.size() < kIhdrSizeEnd) {
    return Status::InvalidArgument("PNG data is truncated: " + std::to_string(encoded.size()) +
                                   " bytes, too short for the IHDR header");
  }
  if (std::memcmp(encoded.data() + kIhdrTypeOffset, "IHDR", 4) != 0) {
    return Status::InvalidArgument("PNG data is corrupt: the first chunk is not IHDR");
  }
  const int64_t width = ReadBigEndian32(encoded, kIhdrWidthOffset);
  const int64_t height = ReadBigEndian32(encoded, kIhdrHeightOffset);
  if (Status size = CheckDeclaredSize(width, height, limits, "PNG"); !size.ok()) return size;

  PngReader reader;
  std::memset(&reader, 0, sizeof(reader));
  reader.data = reinterpret_cast<const unsigned char*>(encoded.data());
  reader.size = encoded.size();
  ReaderGuard guard(&reader);
  reader.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, OnError, OnWarning);
  if (reader.png == nullptr) return Status::Internal("libpng: cannot create a read struct");
  reader.info = png_create_info_struct(reader.png);
  if (reader.info == nullptr) return Status::Internal("libpng: cannot create an info struct");

  PngLayout layout{};
  if (!ReadHeader(&reader, static_cast<png_uint_32>(limits.max_side_pixels), &layout)) {
    return CorruptPng(reader);
  }
  // The IHDR libpng parsed is the one checked above; these guard the transforms' outcome.
  if (layout.width != width || layout.height != height || layout.channels != 3 ||
      layout.bit_depth != 8 || layout.row_bytes != static_cast<size_t>(width) * 3) {
    return Status::InvalidArgument("PNG layout is not supported (" +
                                   std::to_string(layout.channels) + " channels of " +
                                   std::to_string(layout.bit_depth) + " bits after conversion)");
  }

  DecodedImage image;
  image.width = static_cast<int32_t>(width);
  image.height = static_cast<int32_t>(height);
  image.rgb.resize(static_cast<size_t>(width * height * 3));
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  for (size_t y = 0; y < rows.size(); ++y) rows[y] = image.rgb.data() + y * layout.row_bytes;
  if (!ReadPixels(&reader, rows.data())) return CorruptPng(reader);
  return image;
}

}  // namespace tailcut::image_internal
