#include "core/variant_selector.h"

#include <gtest/gtest.h>

#include "obs/metrics.h"

namespace tailcut {
namespace {

constexpr int64_t kSecond = 1'000'000;

VariantConfig Classifier(std::string name, std::string precision, double agreement) {
  VariantConfig v;
  v.name = std::move(name);
  v.precision = std::move(precision);
  v.file_path = "/models/img/" + v.name + ".onnx";
  v.batch_invariant = true;
  v.top1_agreement = agreement;
  return v;
}

// An image classifier's variants as tools/quantize_image_model.py lists them.
class VariantSelectorTest : public ::testing::Test {
 protected:
  VariantSelectorTest() {
    config_.name = "img";
    config_.variants = {Classifier("fp32", "fp32", 1.0), Classifier("fp16", "fp16", 1.0),
                        Classifier("int8-static", "int8", 0.986)};
    config_.default_variant = "fp32";
    policy_.min_samples = 10;
    policy_.min_dwell_micros = 0;
  }

  std::unique_ptr<VariantSelector> Make(std::vector<bool> loaded = {true, true, true}) {
    auto s = VariantSelector::Create(config_, std::move(loaded), policy_, families_.ForModel("img"),
                                     clock_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  // Load that crosses 80 % of the 86 ms SLO.
  static LoadSignals Overloaded() {
    LoadSignals s;
    s.p99_micros = 80'000;
    s.samples = 100;
    s.utilization = 0.95;
    return s;
  }

  ModelConfig config_;
  PrecisionPolicy policy_;
  MetricsRegistry registry_;
  ServableMetricFamilies families_{registry_};
  ManualClock clock_{100 * kSecond};
};

TEST_F(VariantSelectorTest, PinsByNameOrPrecisionAndNamesTheVariantsOnAMiss) {
  auto s = Make();
  ASSERT_TRUE(s);
  EXPECT_EQ(*s->Choose(""), 0);
  EXPECT_EQ(*s->Choose("int8"), 2);
  EXPECT_EQ(*s->Choose("fp16"), 1);
  EXPECT_EQ(*s->Choose("int8-static"), 2);
  auto miss = s->Choose("int4");
  ASSERT_FALSE(miss.ok());
  EXPECT_EQ(miss.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(miss.status().message().find("fp32 (fp32), fp16 (fp16), int8-static (int8)"),
            std::string::npos)
      << miss.status().message();
}

TEST_F(VariantSelectorTest, MovesUnpinnedRequestsToTheInterchangeableFastVariantAndBack) {
  auto s = Make();
  ASSERT_TRUE(s && s->has_controller());
  EXPECT_EQ(s->accurate(), 0);
  EXPECT_EQ(s->fast(), 2);
  s->Tick(Overloaded());
  EXPECT_EQ(s->active(), 2);
  EXPECT_EQ(*s->Choose("fp32"), 0);  // A pin is never moved.
  clock_.AdvanceMicros(20 * kSecond);
  s->Tick(LoadSignals{});  // Idle: the accurate variant fits again.
  EXPECT_EQ(s->active(), 0);
  ModelDescription d;
  s->Describe({"a", "b", "c"}, {"", "", ""}, &d);
  EXPECT_EQ(d.precision_switches, 2);
  EXPECT_EQ(d.precision_controller, "slo: fp32 <-> int8-static");
  ASSERT_EQ(d.variant_details.size(), 3u);
  EXPECT_TRUE(d.variant_details[2].interchangeable);
  EXPECT_DOUBLE_EQ(*d.variant_details[2].top1_agreement, 0.986);
  EXPECT_DOUBLE_EQ(d.top1_agreement_floor, 0.98);
}

TEST_F(VariantSelectorTest, AVariantUnderTheTop1FloorIsNeverChosenByTheController) {
  config_.variants[2].top1_agreement = 0.95;  // Changed the class of 1 photo in 20.
  auto s = Make();
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->has_controller());
  s->Tick(Overloaded());
  EXPECT_EQ(s->active(), 0);
  EXPECT_EQ(*s->Choose("int8"), 2);  // Still served when a request pins it.
  ModelDescription d;
  s->Describe({}, {}, &d);
  EXPECT_EQ(d.precision_policy, "off");
  EXPECT_NE(d.precision_controller.find("under the floor 0.98"), std::string::npos)
      << d.precision_controller;
}

TEST_F(VariantSelectorTest, AnAdminPinHoldsUntilReleased) {
  auto s = Make();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->Pin("fp16").ok());
  s->Tick(Overloaded());
  EXPECT_EQ(s->active(), 1);
  EXPECT_FALSE(s->Pin("int4").ok());
  ASSERT_TRUE(s->Pin("").ok());
  s->Tick(Overloaded());
  EXPECT_EQ(s->active(), 2);
}

TEST_F(VariantSelectorTest, AFailedDefaultFallsBackAndNoneLoadedIsAnError) {
  auto s = Make({false, true, true});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->active(), 1);  // fp32 failed to load: the first loaded one serves.
  EXPECT_FALSE(s->has_controller());
  EXPECT_FALSE(s->Choose("fp32").ok());
  auto none = VariantSelector::Create(config_, {false, false, false}, policy_,
                                      families_.ForModel("img"), clock_);
  EXPECT_EQ(none.status().code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace tailcut
