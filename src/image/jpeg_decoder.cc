// JPEG decoding with libjpeg-turbo, to 8-bit RGB.
//
// libjpeg reports fatal errors through error_exit, which by default prints and calls exit();
// here it longjmps back to the setjmp in ReadHeader / ReadPixels instead. longjmp skips
// destructors, so those two functions hold nothing but C structs and raw pointers: every C++
// object (the pixel vector, the CMYK row buffer) lives in DecodeJpeg's frame, which the jump
// never crosses, and is allocated between the two protected steps.
#include <cstddef>
#include <cstdio>
// The order matters: jpeglib.h uses size_t and FILE without declaring them, and jerror.h's
// list of codes depends on the configuration jpeglib.h includes.
#include <jpeglib.h>
// After jpeglib.h.
#include <jerror.h>

#include <csetjmp>
#include <cstring>
#include <string>
#include <vector>

#include "image/image_formats.h"

namespace tailcut::image_internal {
namespace {

// Everything the libjpeg callbacks need; `error` is the first member because libjpeg hands the
// callbacks cinfo->err, a jpeg_error_mgr*, which is cast back to this.
struct JpegContext {
  jpeg_error_mgr error;
  jpeg_progress_mgr progress;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  int32_t max_scans;  // 0 = no limit.
};

JpegContext* ContextOf(j_common_ptr info) {
  return reinterpret_cast<JpegContext*>(info->err);
}

[[noreturn]] void OnFatalError(j_common_ptr info) {
  JpegContext* context = ContextOf(info);
  (*info->err->format_message)(info, context->message);
  std::longjmp(context->jump, 1);
}

// Warnings that mean the entropy-coded data is damaged or cut short. libjpeg carries on after
// them, filling the rest of the image with grey or garbage, which a classifier would then
// label with confidence; they are errors here. Benign warnings (extraneous bytes between
// markers, an unknown JFIF revision, a bad ICC profile) are ignored, as Pillow ignores them.
bool IsCorruptDataWarning(int code) {
  switch (code) {
    case JWRN_JPEG_EOF:  // Truncated file: libjpeg inserts a fake EOI.
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_ARITH_BAD_CODE:
    case JWRN_MUST_RESYNC:
      return true;
    default:
      return false;
  }
}

void OnMessage(j_common_ptr info, int level) {
  if (level >= 0) return;  // Trace messages.
  ++info->err->num_warnings;
  if (IsCorruptDataWarning(info->err->msg_code)) OnFatalError(info);
}

// Called while libjpeg consumes input, once per chunk of MCU rows; a progressive file's scan
// count is known only as the scans arrive.
void OnProgress(j_common_ptr info) {
  JpegContext* context = ContextOf(info);
  const int scan = reinterpret_cast<j_decompress_ptr>(info)->input_scan_number;
  if (context->max_scans > 0 && scan > context->max_scans) {
    std::snprintf(context->message, sizeof(context->message),
                  "progressive JPEG has more than %d scans (the limit)", context->max_scans);
    std::longjmp(context->jump, 1);
  }
}

struct JpegDecoder {
  jpeg_decompress_struct info;
  JpegContext context;
  bool created;
};

// Protected step 1: create the decompressor and read the header (up to the first scan).
// Only C structs in this frame (see the file comment).
bool ReadHeader(JpegDecoder* decoder, const unsigned char* data, size_t size) {
  if (setjmp(decoder->context.jump) != 0) return false;
  jpeg_create_decompress(&decoder->info);
  decoder->created = true;
  decoder->info.progress = &decoder->context.progress;
  jpeg_mem_src(&decoder->info, data, static_cast<unsigned long>(size));
  jpeg_read_header(&decoder->info, TRUE);
  return true;
}

// Adobe's CMYK polarity (stored inverted), which Pillow always assumes too, converted with
// Pillow's cmyk2rgb arithmetic so the RGB matches what a Pillow-based reference sees.
void CmykRowToRgb(const uint8_t* cmyk, int32_t width, uint8_t* rgb) {
  for (int32_t x = 0; x < width; ++x, cmyk += 4, rgb += 3) {
    const int not_black = cmyk[3];  // 255 - K, with K = 255 - stored.
    for (int c = 0; c < 3; ++c) {
      const int ink = 255 - cmyk[c];
      const int t = ink * not_black + 128;  // ink * not_black / 255, rounded.
      const int v = not_black - (((t >> 8) + t) >> 8);
      rgb[c] = static_cast<uint8_t>(v < 0 ? 0 : v);
    }
  }
}

// Protected step 2: decode every scanline into `rgb` (width * height * 3 bytes). CMYK files
// decode a row into `cmyk_row` (width * 4 bytes) first.
bool ReadPixels(JpegDecoder* decoder, uint8_t* rgb, uint8_t* cmyk_row) {
  if (setjmp(decoder->context.jump) != 0) return false;
  jpeg_decompress_struct* info = &decoder->info;
  jpeg_start_decompress(info);
  const int expected_components = cmyk_row != nullptr ? 4 : 3;
  if (info->output_width != info->image_width || info->output_height != info->image_height ||
      info->output_components != expected_components) {
    std::snprintf(decoder->context.message, sizeof(decoder->context.message),
                  "unexpected decoder output layout (%u x %u, %d components)", info->output_width,
                  info->output_height, info->output_components);
    return false;
  }
  const size_t rgb_row_bytes = static_cast<size_t>(info->output_width) * 3;
  while (info->output_scanline < info->output_height) {
    uint8_t* rgb_row = rgb + static_cast<size_t>(info->output_scanline) * rgb_row_bytes;
    JSAMPROW row = cmyk_row != nullptr ? cmyk_row : rgb_row;
    if (jpeg_read_scanlines(info, &row, 1) != 1) {
      std::snprintf(decoder->context.message, sizeof(decoder->context.message),
                    "decoder stopped at row %u of %u", info->output_scanline, info->output_height);
      return false;
    }
    if (cmyk_row != nullptr) {
      CmykRowToRgb(cmyk_row, static_cast<int32_t>(info->output_width), rgb_row);
    }
  }
  jpeg_finish_decompress(info);
  return true;
}

// Destroys the decompressor however DecodeJpeg returns.
class DecoderGuard {
 public:
  explicit DecoderGuard(JpegDecoder* decoder) : decoder_(decoder) {}
  ~DecoderGuard() {
    if (decoder_->created) jpeg_destroy_decompress(&decoder_->info);
  }
  DecoderGuard(const DecoderGuard&) = delete;
  DecoderGuard& operator=(const DecoderGuard&) = delete;

 private:
  JpegDecoder* decoder_;
};

Status CorruptJpeg(const JpegDecoder& decoder) {
  return Status::InvalidArgument(std::string("JPEG data is corrupt, truncated or unsupported: ") +
                                 decoder.context.message);
}

}  // namespace

Result<DecodedImage> DecodeJpeg(std::span<const std::byte> encoded,
                                const ImageDecodeLimits& limits) {
  JpegDecoder decoder;
  std::memset(&decoder, 0, sizeof(decoder));
  decoder.info.err = jpeg_std_error(&decoder.context.error);
  decoder.context.error.error_exit = OnFatalError;
  decoder.context.error.emit_message = OnMessage;
  decoder.context.progress.progress_monitor = OnProgress;
  decoder.context.max_scans = limits.max_jpeg_scans;
  DecoderGuard guard(&decoder);

  if (!ReadHeader(&decoder, reinterpret_cast<const unsigned char*>(encoded.data()),
                  encoded.size())) {
    return CorruptJpeg(decoder);
  }
  const int64_t width = decoder.info.image_width;
  const int64_t height = decoder.info.image_height;
  if (Status size = CheckDeclaredSize(width, height, limits, "JPEG"); !size.ok()) return size;

  // Grey and YCbCr convert to RGB inside libjpeg; CMYK and YCCK (Adobe) come out as CMYK,
  // which libjpeg cannot turn into RGB, and are converted here.
  const bool cmyk =
      decoder.info.jpeg_color_space == JCS_CMYK || decoder.info.jpeg_color_space == JCS_YCCK;
  decoder.info.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;

  DecodedImage image;
  image.width = static_cast<int32_t>(width);
  image.height = static_cast<int32_t>(height);
  image.rgb.resize(static_cast<size_t>(width * height * 3));
  std::vector<uint8_t> cmyk_row(cmyk ? static_cast<size_t>(width) * 4 : 0);
  if (!ReadPixels(&decoder, image.rgb.data(), cmyk ? cmyk_row.data() : nullptr)) {
    return CorruptJpeg(decoder);
  }
  return image;
}

}  // namespace tailcut::image_internal
