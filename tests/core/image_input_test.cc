// ImageInput (core/image_input.h): the image settings checked against the model's input at
// load, and BYTES of encoded images turned into the model's FP32 input rows, each exactly what
// PreprocessImage makes of the decoded image, with errors naming the image.
#include "core/image_input.h"

#include <gtest/gtest.h>

#include <cstring>

#include "tests/image/test_images.h"

namespace tailcut {
namespace {

using testing::Contains;

const std::vector<TensorSpec> kInputs = {{"input", DataType::kFp32, {-1, 3, 224, 224}}};

std::string AsString(const std::vector<std::byte>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

Tensor Images(std::vector<std::string> encoded, Shape shape) {
  Tensor t;
  t.name = "input";
  t.type = DataType::kBytes;
  t.shape = std::move(shape);
  t.elements = std::move(encoded);
  return t;
}

TEST(ImageInputTest, SettingsThatDoNotFitTheModelFailAtLoadNamingBoth) {
  ImageConfig config;
  auto ok = ImageInput::Create(config, kInputs, "net");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)->input_name(), "input");

  config.crop_width_pixels = 200;
  auto crop = ImageInput::Create(config, kInputs, "net");
  ASSERT_FALSE(crop.ok());
  EXPECT_TRUE(Contains(crop.status().message(), "[?, 3, 224, 224]"));
  EXPECT_TRUE(Contains(crop.status().message(), "[?, 3, 224, 200]"));

  ImageConfig nhwc;
  nhwc.layout = "nhwc";
  EXPECT_FALSE(ImageInput::Create(nhwc, kInputs, "net").ok());

  ImageConfig named;
  named.input = "pixels";
  auto missing = ImageInput::Create(named, kInputs, "net");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(Contains(missing.status().message(), "'pixels' is not an input"));

  const std::vector<TensorSpec> two = {kInputs[0], {"scale", DataType::kFp32, {-1, 1}}};
  auto ambiguous = ImageInput::Create(ImageConfig{}, two, "net");
  ASSERT_FALSE(ambiguous.ok());
  EXPECT_TRUE(Contains(ambiguous.status().message(), "image.input"));
}

TEST(ImageInputTest, EachImageBecomesItsPreprocessedRow) {
  auto input = ImageInput::Create(ImageConfig{}, kInputs, "net");
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  const auto rgb_a = testing::MakePattern(320, 240, 3);
  const auto rgb_b = testing::MakePattern(200, 300, 3);
  const std::string a = AsString(testing::EncodeJpeg(rgb_a, 320, 240));
  const std::string b = AsString(testing::EncodePng(rgb_b, 200, 300));
  Tensor t = Images({a, b}, {2, 1});
  ASSERT_TRUE((*input)->Convert(&t).ok());
  EXPECT_EQ(t.type, DataType::kFp32);
  EXPECT_EQ(t.shape, (Shape{2, 3, 224, 224}));
  EXPECT_TRUE(t.elements.empty());
  const size_t row = 3 * 224 * 224;
  ASSERT_EQ(t.data.size(), 2 * row * sizeof(float));

  ImagePreprocessOptions options;  // What ImageConfig's defaults (torchvision's) say.
  options.mean = ImageConfig{}.mean;
  options.stddev = ImageConfig{}.std;
  for (int i = 0; i < 2; ++i) {
    const std::string& encoded = i == 0 ? a : b;
    auto decoded = DecodeImage(std::span<const std::byte>(
        reinterpret_cast<const std::byte*>(encoded.data()), encoded.size()));
    ASSERT_TRUE(decoded.ok());
    std::vector<float> want(row);
    ASSERT_TRUE(PreprocessImage(*decoded, options, want).ok());
    EXPECT_EQ(std::memcmp(t.As<float>() + i * row, want.data(), row * sizeof(float)), 0)
        << "image " << i;
  }
}

TEST(ImageInputTest, BadImagesAndShapesAreNamedAndLeaveTheTensorAsItWas) {
  auto input = ImageInput::Create(ImageConfig{}, kInputs, "net");
  ASSERT_TRUE(input.ok());
  const std::string good = AsString(testing::EncodeJpeg(testing::MakePattern(64, 64, 3), 64, 64));
  const std::string truncated = good.substr(0, good.size() / 2);

  Tensor t = Images({good, truncated}, {2});
  const Status s = (*input)->Convert(&t);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), "input 'input', image 1 of 2"));
  EXPECT_EQ(t.type, DataType::kBytes);
  EXPECT_EQ(t.elements.size(), 2u);

  Tensor text = Images({"not an image"}, {1});
  EXPECT_TRUE(Contains((*input)->Convert(&text).message(), "image 0"));

  Tensor huge = Images({AsString(testing::PngHeaderOnly(50'000, 50'000))}, {1});
  EXPECT_TRUE(Contains((*input)->Convert(&huge).message(), "50000"));

  Tensor square = Images({good, good, good, good}, {2, 2});
  EXPECT_TRUE(Contains((*input)->Convert(&square).message(), "[n] or [n, 1]"));

  Tensor none = Images({}, {0});
  EXPECT_TRUE(Contains((*input)->Convert(&none).message(), "no image"));
}

}  // namespace
}  // namespace tailcut
