// Variant eligibility: which precision variants the precision controller may serve to
// requests that pin none. A text-embedding model's users index and compare its vectors, so
// the controller may only move between variants that are interchangeable for them: the same
// vector space to a measured tolerance. Interchangeable means
//   - batch-invariant: a row's vector depends only on its own input (dynamic per-tensor
//     quantization fails this: its activation scale comes from the whole batch), and
//   - measured fidelity to fp32 (model.yaml's fidelity_min_cosine / fidelity_recall_at_10,
//     written by tools/quantize_model.py on a fixed check set) at or above the policy's floor.
// A classifier's users read its classes, so a variant with a measured top1_agreement (the
// share of check images whose top-1 equals fp32's, tools/quantize_image_model.py) is held to
// the top-1 floor (min_top1_agreement_ppm) instead of the vector one.
// The operator may waive the fidelity floor (allow_below_fidelity_floor), never batch
// invariance. A variant that fails is still served when a request pins it.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/inference_api.h"  // VariantDescription
#include "core/precision_controller.h"
#include "engine/model_config.h"

namespace tailcut {

// Ok when the controller may serve `variant` in place of the accurate one; otherwise
// FailedPrecondition saying which property is missing, with the measured figure and the floor.
Status CheckInterchangeable(const VariantConfig& variant, const PrecisionPolicy& policy);

// What a model description says of one variant: its configuration (precision, batch
// invariance, measured fidelity or perplexity), whether it loaded (else `error`), its file's
// digest, and `eligibility` (ok: the controller may serve it; else why not).
VariantDescription DescribeVariant(const VariantConfig& variant, bool loaded, std::string error,
                                   std::string file_digest, const Status& eligibility);

// The fast variant the controller moves to: among `variants` (index-aligned with `loaded`),
// those named `policy.fast_variant` or, for a precision alias ("int8"), of that precision, in
// listed order; the first that is loaded, not `accurate`, and interchangeable. -1 when none
// is, with `why` saying why each candidate was passed over.
int SelectFastVariant(const std::vector<VariantConfig>& variants, const std::vector<bool>& loaded,
                      int accurate, const PrecisionPolicy& policy, std::string* why);

// Generative models: ok when `variant`'s measured perplexity (model.yaml, `tailcut
// perplexity` on a fixed text) is at most `max_increase_ppm` parts per million above the
// default variant's (`reference`); FailedPrecondition naming both figures, or saying which
// was never measured, otherwise. The controller then never moves an unpinned request to a
// variant of measurably worse quality, and one never measured is served only when pinned.
Status CheckPerplexityWithin(const VariantConfig& variant, const VariantConfig& reference,
                             int64_t max_increase_ppm);

}  // namespace tailcut
