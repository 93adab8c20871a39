// Classify and ReadLabels (core/classification.h): KServe's classification extension as
// Triton answers it, "score:index[:label]" elements of the top k scores of each row.
#include "core/classification.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace tailcut {
namespace {

Tensor Scores(const std::vector<float>& values, Shape shape) {
  Tensor t;
  t.name = "logits";
  t.type = DataType::kFp32;
  t.shape = std::move(shape);
  const auto* p = reinterpret_cast<const std::byte*>(values.data());
  t.data.assign(p, p + values.size() * sizeof(float));
  return t;
}

TEST(ClassifyTest, TopKOfEachRowHighestFirstWithLabels) {
  const Tensor scores = Scores({0.1f, 2.5f, -1.0f, 0.7f,  //
                                3.0f, 0.0f, 0.5f, 1.0f},
                               {2, 4});
  auto out = Classify(scores, 2, {"tench", "goldfish", "shark", "hen"});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->name, "logits");
  EXPECT_EQ(out->type, DataType::kBytes);
  EXPECT_EQ(out->shape, (Shape{2, 2}));
  EXPECT_TRUE(out->data.empty());
  EXPECT_EQ(out->elements, (std::vector<std::string>{"2.500000:1:goldfish", "0.700000:3:hen",
                                                     "3.000000:0:tench", "1.000000:3:hen"}));
}

TEST(ClassifyTest, WithoutLabelsScoreAndIndexOnlyAndTiesGoToTheLowerIndex) {
  auto out = Classify(Scores({1.0f, 2.0f, 2.0f}, {3}), 3, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->shape, (Shape{3}));
  EXPECT_EQ(out->elements, (std::vector<std::string>{"2.000000:1", "2.000000:2", "1.000000:0"}));
}

TEST(ClassifyTest, MoreClassesThanTheModelHasGivesThemAll) {
  auto out = Classify(Scores({0.5f, 0.25f}, {1, 2}), 10, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->shape, (Shape{1, 2}));
  EXPECT_EQ(out->elements.size(), 2u);
}

TEST(ClassifyTest, Fp16ScoresAreRead) {
  Tensor t;
  t.name = "h";
  t.type = DataType::kFp16;
  t.shape = {1, 2};
  const std::vector<uint16_t> halves = {FloatToHalf(0.25f), FloatToHalf(1.5f)};
  const auto* p = reinterpret_cast<const std::byte*>(halves.data());
  t.data.assign(p, p + 4);
  auto out = Classify(t, 1, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->elements, (std::vector<std::string>{"1.500000:1"}));
}

TEST(ClassifyTest, BadRequestsAreClearErrors) {
  const Tensor scores = Scores({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  auto rank3 = Classify(scores, 1, {});
  ASSERT_FALSE(rank3.ok());
  EXPECT_EQ(rank3.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(rank3.status().message().find("[rows, classes]"), std::string::npos);

  auto zero = Classify(Scores({1, 2}, {2}), 0, {});
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("positive"), std::string::npos);

  Tensor ints;
  ints.name = "ids";
  ints.type = DataType::kInt64;
  ints.shape = {1};
  ints.data.resize(8);
  auto typed = Classify(ints, 1, {});
  ASSERT_FALSE(typed.ok());
  EXPECT_NE(typed.status().message().find("INT64"), std::string::npos);

  auto labels = Classify(Scores({1, 2, 3}, {3}), 1, {"only", "two"});
  ASSERT_FALSE(labels.ok());
  EXPECT_NE(labels.status().message().find("3 classes"), std::string::npos);
}

TEST(ReadLabelsTest, OneLabelALineWithWindowsLineEndsAndNoFinalNewline) {
  const auto path = std::filesystem::temp_directory_path() / "tailcut_labels_test.txt";
  std::ofstream(path) << "tench, Tinca tinca\r\ngoldfish\r\ngreat white shark";
  auto labels = ReadLabels(path.string());
  std::filesystem::remove(path);
  ASSERT_TRUE(labels.ok()) << labels.status().ToString();
  EXPECT_EQ(*labels,
            (std::vector<std::string>{"tench, Tinca tinca", "goldfish", "great white shark"}));
  auto missing = ReadLabels("/nonexistent/labels.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/labels.txt"), std::string::npos);
}

}  // namespace
}  // namespace tailcut
