#include "core/batch_cost_model.h"

#include <algorithm>
#include <cmath>

namespace tailcut {

BatchCostModel::BatchCostModel(const BatchCostModelOptions& options)
    : weight_(1.0 / static_cast<double>(std::max<int64_t>(1, options.memory_batches))),
      margin_step_(static_cast<double>(std::max<int64_t>(1, options.margin_step_micros))),
      min_margin_micros_(static_cast<double>(options.min_margin_micros)),
      max_margin_micros_(static_cast<double>(options.max_margin_micros)),
      margin_micros_(std::clamp(static_cast<double>(options.initial_margin_micros),
                                min_margin_micros_, max_margin_micros_)) {}

void BatchCostModel::ObserveWait(int64_t estimated_micros, int64_t actual_micros) {
  // Stochastic approximation of the 0.99 quantile: at equilibrium 1 % of the tasks exceed
  // it, since then the expected move 0.01 x 0.99 - 0.99 x 0.01 is zero.
  const double excess = static_cast<double>(actual_micros - estimated_micros);
  margin_micros_ += excess > margin_micros_ ? 0.99 * margin_step_ : -0.01 * margin_step_;
  margin_micros_ = std::clamp(margin_micros_, min_margin_micros_, max_margin_micros_);
}

void BatchCostModel::Observe(int64_t padded_tokens, int64_t tokens, int64_t micros) {
  if (padded_tokens <= 0 || micros < 0) return;
  ++samples_;
  // The first batches are averaged plainly (weight 1/n), so the start is not pulled towards
  // the zeros the moments begin at.
  const double w = std::max(weight_, 1.0 / static_cast<double>(samples_));
  const double x = static_cast<double>(padded_tokens);
  const double y = static_cast<double>(micros);
  mean_x_ += w * (x - mean_x_);
  mean_y_ += w * (y - mean_y_);
  mean_xx_ += w * (x * x - mean_xx_);
  mean_xy_ += w * (x * y - mean_xy_);
  if (tokens > 0) padding_ += w * (std::max(1.0, x / static_cast<double>(tokens)) - padding_);
  Refit();
}

void BatchCostModel::Refit() {
  const double var = mean_xx_ - mean_x_ * mean_x_;
  const double cov = mean_xy_ - mean_x_ * mean_y_;
  // The slope is identifiable only when recent batch sizes spread (standard deviation at
  // least 10 % of the mean); a negative one is noise. Otherwise the last good slope stays.
  if (samples_ >= 2 && var > 0.01 * mean_x_ * mean_x_ && cov >= 0) {
    micros_per_token_ = cov / var;
    slope_known_ = true;
  }
  if (!slope_known_) micros_per_token_ = mean_y_ / mean_x_;
  // Through the recent batches' mean point, so the size that is running is predicted by what
  // it just took, whatever the slope. A fixed part cannot be negative: the slope gives way.
  fixed_micros_ = mean_y_ - micros_per_token_ * mean_x_;
  if (fixed_micros_ < 0) {
    fixed_micros_ = 0;
    micros_per_token_ = mean_y_ / mean_x_;
  }
}

int64_t BatchCostModel::BatchMicros(int64_t padded_tokens) const {
  if (!measured()) return 0;
  return static_cast<int64_t>(fixed_micros_ +
                              micros_per_token_ * static_cast<double>(padded_tokens));
}

int64_t BatchCostModel::TokensWithin(int64_t micros) const {
  if (!slope_known_ || micros_per_token_ <= 0) return 0;
  const double tokens = (static_cast<double>(micros) - fixed_micros_) / micros_per_token_;
  return std::max<int64_t>(1, static_cast<int64_t>(tokens));
}

int64_t BatchCostModel::DrainMicros(int64_t rows, int64_t tokens, int64_t max_batch_size,
                                    int64_t max_batch_tokens) const {
  if (!measured() || rows <= 0) return 0;
  const double padded = static_cast<double>(tokens) * padding_;
  double batches = 1;
  if (max_batch_size > 0) {
    batches = std::max(batches, std::ceil(static_cast<double>(rows) /
                                          static_cast<double>(max_batch_size)));
  }
  if (max_batch_tokens > 0) {
    batches = std::max(batches, std::ceil(padded / static_cast<double>(max_batch_tokens)));
  }
  // A row longer than the token limit still runs alone: never more batches than rows.
  batches = std::min(batches, static_cast<double>(rows));
  return static_cast<int64_t>(batches * fixed_micros_ + micros_per_token_ * padded);
}

}  // namespace tailcut
