#include "core/variant_eligibility.h"

#include <gtest/gtest.h>

namespace tailcut {
namespace {

VariantConfig Variant(std::string name, std::string precision, bool invariant,
                      std::optional<double> cosine, std::optional<double> recall) {
  VariantConfig v;
  v.name = std::move(name);
  v.precision = std::move(precision);
  v.file_path = "/models/m/" + v.name + ".onnx";
  v.batch_invariant = invariant;
  v.fidelity_min_cosine = cosine;
  v.fidelity_recall_at_10 = recall;
  return v;
}

class VariantEligibilityTest : public ::testing::Test {
 protected:
  PrecisionPolicy policy_;  // Floor: cosine 0.985, recall@10 0.93.
  std::vector<VariantConfig> variants_ = {
      Variant("fp32", "fp32", true, 1.0, 1.0),
      Variant("int8-dynamic", "int8", false, 0.97, 0.9),     // Fast but batch-dependent.
      Variant("int8-low", "int8", true, 0.95, 0.97),         // Invariant, below the floor.
      Variant("int8-per-token", "int8", true, 0.99, 0.95),  // Interchangeable.
      Variant("fp16", "fp16", true, 0.99999, 1.0),
  };
  std::vector<bool> loaded_ = {true, true, true, true, true};
};

TEST_F(VariantEligibilityTest, BatchDependentVariantIsNeverInterchangeable) {
  Status s = CheckInterchangeable(variants_[1], policy_);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(s.message().find("batch-invariant"), std::string::npos) << s.message();
  policy_.allow_below_fidelity_floor = true;  // The opt-in waives fidelity, not invariance.
  EXPECT_FALSE(CheckInterchangeable(variants_[1], policy_).ok());
}

TEST_F(VariantEligibilityTest, FidelityFloorIsEnforcedAndNamed) {
  Status s = CheckInterchangeable(variants_[2], policy_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("0.95"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("0.985"), std::string::npos) << s.message();
  EXPECT_TRUE(CheckInterchangeable(variants_[3], policy_).ok());
  policy_.min_fidelity_recall_at_10_ppm = 960'000;
  s = CheckInterchangeable(variants_[3], policy_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("recall@10"), std::string::npos) << s.message();
}

TEST_F(VariantEligibilityTest, UnmeasuredVariantNeedsTheOptIn) {
  VariantConfig v = Variant("custom", "int8", true, std::nullopt, std::nullopt);
  EXPECT_FALSE(CheckInterchangeable(v, policy_).ok());
  policy_.allow_below_fidelity_floor = true;
  EXPECT_TRUE(CheckInterchangeable(v, policy_).ok());
}

TEST_F(VariantEligibilityTest, AClassifierIsHeldToTheTop1FloorNotTheVectorOne) {
  // No cosine or recall measured (a classifier's users read classes): the top-1 agreement
  // with fp32 decides, against min_top1_agreement_ppm (0.98).
  VariantConfig v = Variant("int8-static", "int8", true, std::nullopt, std::nullopt);
  v.top1_agreement = 0.986;
  EXPECT_TRUE(CheckInterchangeable(v, policy_).ok());
  v.top1_agreement = 0.97;
  Status s = CheckInterchangeable(v, policy_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("top-1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("0.97"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("0.98"), std::string::npos) << s.message();
  v.batch_invariant = false;  // Batch invariance still comes first.
  v.top1_agreement = 1.0;
  EXPECT_FALSE(CheckInterchangeable(v, policy_).ok());
}

TEST_F(VariantEligibilityTest, AliasPicksTheFirstInterchangeableVariantOfThatPrecision) {
  std::string why;
  EXPECT_EQ(SelectFastVariant(variants_, loaded_, 0, policy_, &why), 3);
  policy_.allow_below_fidelity_floor = true;
  EXPECT_EQ(SelectFastVariant(variants_, loaded_, 0, policy_, &why), 2);
}

TEST_F(VariantEligibilityTest, ExactNameIsCheckedToo) {
  std::string why;
  policy_.fast_variant = "int8-dynamic";
  EXPECT_EQ(SelectFastVariant(variants_, loaded_, 0, policy_, &why), -1);
  EXPECT_NE(why.find("batch-invariant"), std::string::npos) << why;
  policy_.fast_variant = "fp16";
  EXPECT_EQ(SelectFastVariant(variants_, loaded_, 0, policy_, &why), 4);
}

TEST_F(VariantEligibilityTest, NoneEligibleExplainsEveryCandidate) {
  std::string why;
  loaded_[3] = false;
  EXPECT_EQ(SelectFastVariant(variants_, loaded_, 0, policy_, &why), -1);
  EXPECT_NE(why.find("int8-dynamic"), std::string::npos) << why;
  EXPECT_NE(why.find("int8-low"), std::string::npos) << why;
  EXPECT_NE(why.find("failed to load"), std::string::npos) << why;
  policy_.fast_variant = "bf16";
  EXPECT_EQ(SelectFastVariant(variants_, loaded_, 0, policy_, &why), -1);
  EXPECT_NE(why.find("no variant matches"), std::string::npos) << why;
}

TEST_F(VariantEligibilityTest, TheAccurateVariantIsNotItsOwnFastVariant) {
  std::string why;
  policy_.fast_variant = "fp32";
  EXPECT_EQ(SelectFastVariant(variants_, loaded_, 0, policy_, &why), -1);
}

}  // namespace
}  // namespace tailcut
