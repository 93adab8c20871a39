#include "image/image_preprocess.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "image/image_resample.h"
#include "tests/image/test_images.h"

namespace tailcut {
namespace {

using testing::Contains;

DecodedImage MakeImage(int32_t width, int32_t height) {
  return DecodedImage{width, height, testing::MakePattern(width, height, 3)};
}

// (v / 255 - mean) / stddev with the default options' constants.
float Normalised(int value, int channel = 0) {
  const ImagePreprocessOptions defaults;
  return (static_cast<float>(value) / 255.0f - defaults.mean[channel]) / defaults.stddev[channel];
}

ImagePreprocessOptions NoResize(int32_t crop_width, int32_t crop_height) {
  ImagePreprocessOptions options;
  options.resize_shorter_side_pixels = 0;
  options.crop_width_pixels = crop_width;
  options.crop_height_pixels = crop_height;
  return options;
}

TEST(ImagePreprocessTest, DefaultsFillA224By224NchwTensor) {
  const DecodedImage image = MakeImage(640, 480);
  std::vector<float> out(3 * 224 * 224, NAN);
  ASSERT_TRUE(PreprocessImage(image, {}, out).ok());
  for (float v : out) {
    ASSERT_TRUE(std::isfinite(v));
    // Every value is one of the 256 normalised levels' range.
    ASSERT_GE(v, Normalised(0) - 1e-6f);
    ASSERT_LE(v, Normalised(255) + 1e-6f);
  }
}

TEST(ImagePreprocessTest, WithoutResizeTheCropIsTheCentreOfTheImageNormalised) {
  // 9 x 7 image, 4 x 4 crop: offsets round(5 / 2) = 2 and round(3 / 2) = 2 (halves to even,
  // as torchvision's CenterCrop computes them with Python's round).
  const DecodedImage image = MakeImage(9, 7);
  std::vector<float> out(3 * 4 * 4);
  ASSERT_TRUE(PreprocessImage(image, NoResize(4, 4), out).ok());
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 4; ++y) {
      for (int x = 0; x < 4; ++x) {
        const int source = image.rgb[((y + 2) * 9 + (x + 2)) * 3 + c];
        ASSERT_FLOAT_EQ(out[(c * 4 + y) * 4 + x], Normalised(source, c)) << c << y << x;
      }
    }
  }
}

TEST(ImagePreprocessTest, CropOffsetRoundsHalvesToEven) {
  // A width of 8 with a crop of 3 leaves 5: round(2.5) = 2; a width of 10 leaves 7:
  // round(3.5) = 4. Column x of the image holds 255 * x / (width - 1) in red.
  for (auto [width, left] : {std::pair{8, 2}, {10, 4}, {9, 3}}) {
    const DecodedImage image = MakeImage(width, 3);
    std::vector<float> out(3 * 3 * 3);
    ASSERT_TRUE(PreprocessImage(image, NoResize(3, 3), out).ok());
    EXPECT_FLOAT_EQ(out[0], Normalised(image.rgb[left * 3])) << "width " << width;
  }
}

TEST(ImagePreprocessTest, NhwcHoldsTheSameValuesAsNchw) {
  const DecodedImage image = MakeImage(300, 200);
  ImagePreprocessOptions options;
  options.crop_width_pixels = 100;
  options.crop_height_pixels = 60;
  std::vector<float> nchw(3 * 100 * 60);
  ASSERT_TRUE(PreprocessImage(image, options, nchw).ok());
  options.layout = ImagePreprocessOptions::Layout::kNhwc;
  std::vector<float> nhwc(nchw.size());
  ASSERT_TRUE(PreprocessImage(image, options, nhwc).ok());
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 100 * 60; ++i) ASSERT_EQ(nchw[c * 100 * 60 + i], nhwc[i * 3 + c]);
  }
}

TEST(ImagePreprocessTest, AFlatImageStaysFlatThroughTheResize) {
  for (auto [width, height] : {std::pair{640, 480}, {100, 1000}, {50, 50}}) {
    DecodedImage image{width, height, std::vector<uint8_t>(size_t(width) * height * 3, 200)};
    std::vector<float> out(3 * 224 * 224);
    ASSERT_TRUE(PreprocessImage(image, {}, out).ok());
    for (float v : out) {
      // Fixed-point weights sum to 1 within their rounding: at most one level off.
      ASSERT_NEAR(v, Normalised(200), 1.01f / 255.0f / ImagePreprocessOptions{}.stddev[0]);
    }
  }
}

TEST(ImagePreprocessTest, VeryThinImagesResizeWithoutBuildingTheWholeResize) {
  // 2 x 16384 resizes to 256 x 2,097,152: only the crop's rows are computed.
  DecodedImage image = MakeImage(2, 16384);
  std::vector<float> out(3 * 224 * 224);
  EXPECT_TRUE(PreprocessImage(image, {}, out).ok());
}

TEST(ImagePreprocessTest, WrongOutputSizeIsRefused) {
  const DecodedImage image = MakeImage(64, 64);
  for (size_t size : {size_t{0}, size_t{3 * 224 * 224 - 1}, size_t{3 * 224 * 224 + 1}}) {
    std::vector<float> out(size);
    const Status status = PreprocessImage(image, {}, out);
    EXPECT_EQ(status.code(), Status::Code::kInvalidArgument);
    EXPECT_TRUE(Contains(status.message(), "output has " + std::to_string(size) +
                                               " floats, a 224 x 224 RGB crop needs 150528"));
  }
}

TEST(ImagePreprocessTest, ImageSmallerThanTheCropIsRefusedNotPadded) {
  std::vector<float> out(3 * 224 * 224);
  Status status = PreprocessImage(MakeImage(200, 300), NoResize(224, 224), out);
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(status.message(),
                       "the image is 200 x 300 pixels (resizing is off), smaller than the "
                       "224 x 224 crop"));

  ImagePreprocessOptions options;
  options.resize_shorter_side_pixels = 200;  // Below the crop: every image fails.
  status = PreprocessImage(MakeImage(640, 480), options, out);
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(status.message(),
                       "266 x 200 pixels after resizing (from 640 x 480), smaller than the "
                       "224 x 224 crop"));
}

TEST(ImagePreprocessTest, InvalidOptionsAndImagesAreRefused) {
  std::vector<float> out(3 * 224 * 224);
  const DecodedImage image = MakeImage(300, 300);
  ImagePreprocessOptions options;
  options.stddev[1] = 0.0f;
  EXPECT_EQ(PreprocessImage(image, options, out).code(), Status::Code::kInvalidArgument);
  options = {};
  options.resize_shorter_side_pixels = -1;
  EXPECT_EQ(PreprocessImage(image, options, out).code(), Status::Code::kInvalidArgument);
  options = {};
  options.crop_width_pixels = 0;
  EXPECT_EQ(PreprocessImage(image, options, std::span<float>()).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(PreprocessImage(DecodedImage{}, {}, out).code(), Status::Code::kInvalidArgument);
  // A pixel buffer that does not match the declared size.
  DecodedImage short_buffer = MakeImage(300, 300);
  short_buffer.rgb.resize(100);
  EXPECT_EQ(PreprocessImage(short_buffer, {}, out).code(), Status::Code::kInvalidArgument);
}

TEST(ImageResizeTest, WindowOutsideTheResizedImageIsRefused) {
  const DecodedImage image = MakeImage(10, 10);
  std::vector<uint8_t> out(5 * 5 * 3);
  EXPECT_TRUE(ResizeWindow(image, 20, 20, ResampleFilter::kBicubic, {15, 15, 5, 5}, out).ok());
  EXPECT_FALSE(ResizeWindow(image, 20, 20, ResampleFilter::kBicubic, {16, 0, 5, 5}, out).ok());
  EXPECT_FALSE(ResizeWindow(image, 20, 20, ResampleFilter::kBicubic, {-1, 0, 5, 5}, out).ok());
  EXPECT_FALSE(ResizeWindow(image, 0, 20, ResampleFilter::kBicubic, {0, 0, 5, 5}, out).ok());
  EXPECT_FALSE(ResizeWindow(image, 20, 20, ResampleFilter::kBicubic, {0, 0, 5, 4}, out).ok());
}

TEST(ImageResizeTest, SameSizeIsACopy) {
  const DecodedImage image = MakeImage(31, 17);
  std::vector<uint8_t> out(image.rgb.size());
  ASSERT_TRUE(ResizeWindow(image, 31, 17, ResampleFilter::kBicubic, {0, 0, 31, 17}, out).ok());
  EXPECT_EQ(out, image.rgb);
}

TEST(ImageResizeTest, AWindowEqualsTheSameRegionOfTheFullResize) {
  // One axis resized, the other kept, and both: the window never depends on what is around it.
  const DecodedImage image = MakeImage(97, 61);
  for (auto [width, height] : {std::pair{40, 61}, {97, 150}, {40, 150}, {200, 30}}) {
    std::vector<uint8_t> full(size_t(width) * height * 3);
    ASSERT_TRUE(
        ResizeWindow(image, width, height, ResampleFilter::kBicubic, {0, 0, width, height}, full)
            .ok());
    const PixelWindow window{7, 5, width / 2, height / 3};
    std::vector<uint8_t> part(size_t(window.width) * window.height * 3);
    ASSERT_TRUE(ResizeWindow(image, width, height, ResampleFilter::kBicubic, window, part).ok());
    for (int y = 0; y < window.height; ++y) {
      for (int i = 0; i < window.width * 3; ++i) {
        ASSERT_EQ(part[(y * window.width) * 3 + i],
                  full[((y + window.y) * width + window.x) * 3 + i])
            << width << " x " << height << " at row " << y;
      }
    }
  }
}

}  // namespace
}  // namespace tailcut
