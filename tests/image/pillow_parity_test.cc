// Parity with the Python reference preprocessing (Pillow resize + torchvision-style crop and
// normalisation), on the fixtures tools/make_image_fixtures.py writes to tests/image/data/.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "image/image_decoder.h"
#include "image/image_preprocess.h"

namespace tailcut {
namespace {

const std::string kDataDir = std::string(TAILCUT_SOURCE_DIR) + "/tests/image/data/";

std::vector<char> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path << " (made by tools/make_image_fixtures.py)";
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct ParityCase {
  std::string name;
  std::string source;
  ImagePreprocessOptions options;
  std::vector<float> reference;
};

std::vector<ParityCase> LoadCases() {
  const std::vector<char> text = ReadFile(kDataDir + "pillow_reference.json");
  const nlohmann::json manifest = nlohmann::json::parse(text.begin(), text.end());
  std::vector<ParityCase> cases;
  for (const nlohmann::json& entry : manifest.at("cases")) {
    ParityCase c;
    c.name = entry.at("name").get<std::string>();
    c.source = entry.at("source").get<std::string>();
    c.options.resize_shorter_side_pixels = entry.at("resize_shorter_side_pixels").get<int32_t>();
    c.options.crop_width_pixels = entry.at("crop_width_pixels").get<int32_t>();
    c.options.crop_height_pixels = entry.at("crop_height_pixels").get<int32_t>();
    c.options.filter = entry.at("filter").get<std::string>() == "bilinear"
                           ? ResampleFilter::kBilinear
                           : ResampleFilter::kBicubic;
    c.options.layout = entry.at("layout").get<std::string>() == "NHWC"
                           ? ImagePreprocessOptions::Layout::kNhwc
                           : ImagePreprocessOptions::Layout::kNchw;
    for (size_t i = 0; i < 3; ++i) {
      c.options.mean[i] = entry.at("mean").at(i).get<float>();
      c.options.stddev[i] = entry.at("stddev").at(i).get<float>();
    }
    const std::vector<char> bytes = ReadFile(kDataDir + entry.at("reference").get<std::string>());
    c.reference.resize(bytes.size() / sizeof(float));
    std::memcpy(c.reference.data(), bytes.data(), c.reference.size() * sizeof(float));
    cases.push_back(std::move(c));
  }
  return cases;
}

// Preprocesses the case's source file with `options`.
std::vector<float> Preprocess(const ParityCase& c, const ImagePreprocessOptions& options) {
  const std::vector<char> encoded = ReadFile(kDataDir + c.source);
  Result<DecodedImage> image =
      DecodeImage(std::as_bytes(std::span(encoded.data(), encoded.size())));
  EXPECT_TRUE(image.ok()) << image.status().ToString();
  std::vector<float> out(3 * static_cast<size_t>(options.crop_width_pixels) *
                         options.crop_height_pixels);
  if (!image.ok()) return out;
  const Status status = PreprocessImage(*image, options, out);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return out;
}

struct Difference {
  float max = 0;
  double mean = 0;
};

Difference Compare(std::span<const float> a, std::span<const float> b) {
  Difference d;
  EXPECT_EQ(a.size(), b.size());
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const float diff = std::fabs(a[i] - b[i]);
    d.max = std::max(d.max, diff);
    d.mean += diff;
  }
  d.mean /= std::max<size_t>(n, 1);
  return d;
}

// One 8-bit level in float units: 1 / 255 / stddev (the largest over the channels), plus float
// rounding.
float OneLevel(const ImagePreprocessOptions& options) {
  const float smallest_stddev = *std::min_element(options.stddev.begin(), options.stddev.end());
  return 1.0f / 255.0f / smallest_stddev + 1e-5f;
}

// The resampling is Pillow's, bit for bit, so from identical pixels the floats agree up to
// float rounding (measured: 0). A PNG decodes to identical pixels everywhere; a JPEG's pixels
// depend on the IDCT of the libjpeg build (the system's libjpeg-turbo 2.1 and Pillow's bundled
// 3.x agree here, measured 0, but need not everywhere), so a JPEG may be one level off. Wrong
// resampling fails these by far: rounding down instead of to nearest is 2 levels off, the
// other filter 13-29, no antialiasing 84-112, a crop offset floored instead of rounded 238.
float Bound(const ParityCase& c) {
  const bool lossless = c.source.ends_with(".png");
  return lossless ? 1e-5f : OneLevel(c.options);
}

TEST(PillowParityTest, MatchesPillow) {
  const std::vector<ParityCase> cases = LoadCases();
  ASSERT_FALSE(cases.empty());
  for (const ParityCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<float> ours = Preprocess(c, c.options);
    const Difference d = Compare(ours, c.reference);
    std::cout << "[ parity   ] " << c.name << ": max |diff| " << d.max << " ("
              << d.max / OneLevel(c.options) << " levels), mean " << d.mean << "\n";
    EXPECT_LE(d.max, Bound(c));
  }
}

TEST(PillowParityTest, TheBoundTellsTheFiltersApart) {
  // The same comparison with the other filter must fail the bound by far: evidence the
  // bound checks the filter, not just the size and the normalisation.
  for (const ParityCase& c : LoadCases()) {
    SCOPED_TRACE(c.name);
    ImagePreprocessOptions wrong = c.options;
    wrong.filter = c.options.filter == ResampleFilter::kBicubic ? ResampleFilter::kBilinear
                                                                : ResampleFilter::kBicubic;
    const Difference d = Compare(Preprocess(c, wrong), c.reference);
    std::cout << "[ parity   ] " << c.name << " with the other filter: max |diff| " << d.max << " ("
              << d.max / OneLevel(c.options) << " levels), mean " << d.mean << "\n";
    EXPECT_GT(d.max, 5 * OneLevel(c.options));
  }
}

}  // namespace
}  // namespace tailcut
