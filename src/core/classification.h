// KServe's classification extension, as Triton implements it: the scores of an output become
// its top k classes, each a BYTES element "score:index" or "score:index:label" with the
// score as std::to_string prints it (six decimals), highest score first, ties by the lower
// index. A model folder's labels file (model.yaml `labels`) names the classes.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "engine/tensor.h"

namespace tailcut {

// The class names of a labels file: one a line, in class-index order (a trailing newline
// and '\r' line ends are fine). NotFound or InvalidArgument naming the file.
Result<std::vector<std::string>> ReadLabels(const std::string& path);

// `scores` (FP32, FP16 or FP64, shape [rows, classes] or [classes]) as BYTES [rows, k] (or
// [k]), k = min(top_k, classes). `labels` may be empty (no names) or name every class;
// InvalidArgument for another datatype, a rank above 2, or top_k < 1.
Result<Tensor> Classify(const Tensor& scores, int32_t top_k,
                        const std::vector<std::string>& labels);

}  // namespace tailcut
