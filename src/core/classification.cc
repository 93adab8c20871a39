#include "core/classification.h"

#include <algorithm>
#include <fstream>
#include <numeric>

#include "engine/tensor.h"

namespace tailcut {

Result<std::vector<std::string>> ReadLabels(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read the labels file '" + path + "'");
  std::vector<std::string> labels;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    labels.push_back(std::move(line));
  }
  if (labels.empty()) return Status::InvalidArgument("the labels file '" + path + "' is empty");
  return labels;
}

Result<Tensor> Classify(const Tensor& scores, int32_t top_k,
                        const std::vector<std::string>& labels) {
  const std::string where = "output '" + scores.name + "': classification";
  if (top_k < 1) {
    return Status::InvalidArgument(where + " must be a positive number of classes, got " +
                                   std::to_string(top_k));
  }
  if (scores.type != DataType::kFp32 && scores.type != DataType::kFp16 &&
      scores.type != DataType::kFp64) {
    return Status::InvalidArgument(where + " needs FP32, FP16 or FP64 scores; the output is " +
                                   std::string(DataTypeName(scores.type)));
  }
  if (scores.shape.empty() || scores.shape.size() > 2) {
    return Status::InvalidArgument(where +
                                   " needs scores of shape [rows, classes] or "
                                   "[classes]; the output is " +
                                   ShapeToString(scores.shape));
  }
  const int64_t classes = scores.shape.back();
  const int64_t rows = scores.shape.size() == 2 ? scores.shape[0] : 1;
  if (!labels.empty() && static_cast<int64_t>(labels.size()) != classes) {
    return Status::Internal(where + ": the model has " + std::to_string(classes) +
                            " classes but its labels file names " + std::to_string(labels.size()));
  }
  // One row's scores at a time, read once whatever the datatype.
  std::vector<double> row(static_cast<size_t>(classes));
  auto read_row = [&](int64_t r) {
    for (int64_t c = 0; c < classes; ++c) {
      const int64_t i = r * classes + c;
      row[static_cast<size_t>(c)] = scores.type == DataType::kFp16
                                        ? HalfToFloat(scores.As<uint16_t>()[i])
                                    : scores.type == DataType::kFp64 ? scores.As<double>()[i]
                                                                     : scores.As<float>()[i];
    }
  };
  const int64_t k = std::min<int64_t>(top_k, classes);
  Tensor out;
  out.name = scores.name;
  out.type = DataType::kBytes;
  out.shape = scores.shape;
  out.shape.back() = k;
  out.elements.reserve(static_cast<size_t>(rows * k));
  std::vector<int64_t> order(static_cast<size_t>(classes));
  for (int64_t r = 0; r < rows; ++r) {
    read_row(r);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
      const double sa = row[static_cast<size_t>(a)], sb = row[static_cast<size_t>(b)];
      return sa > sb || (sa == sb && a < b);
    });
    for (int64_t j = 0; j < k; ++j) {
      const int64_t c = order[static_cast<size_t>(j)];
      std::string e =
          std::to_string(static_cast<float>(row[static_cast<size_t>(c)])) + ":" + std::to_string(c);
      if (!labels.empty()) e += ":" + labels[static_cast<size_t>(c)];
      out.elements.push_back(std::move(e));
    }
  }
  return out;
}

}  // namespace tailcut
