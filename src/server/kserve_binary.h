// Triton's binary tensor data extension for KServe v2 over HTTP, which tritonclient.http
// uses by default. A request whose Inference-Header-Content-Length header says N is N bytes
// of JSON followed by the inputs' elements: each input with parameters.binary_data_size K
// takes the next K bytes, in the order of "inputs" (numbers little-endian and row-major;
// BYTES elements each a 4-byte little-endian length and its bytes). An output is answered
// the same way when the request's parameters.binary_data_output or the output's own
// parameters.binary_data is true: the response then has the header too, and its JSON gives
// the output's binary_data_size instead of "data".
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "server/http_server.h"

namespace tailcut {

struct KServeBinaryBody {
  std::string json;    // The inference header.
  std::string binary;  // Everything after it.
};
// Splits `body` at the length the header gives (`header` is its value); a value that is not
// a decimal number or is longer than the body is InvalidArgument.
Result<KServeBinaryBody> SplitKServeBinaryBody(std::string body, std::string_view header);

// For each of `inputs` (the request's "inputs" array), the bytes it takes from `binary`, or
// nullopt for an input given as JSON "data". The sizes must add up to all of `binary`, and an
// input with binary_data_size must have no "data".
Result<std::vector<std::optional<std::string_view>>> KServeBinaryInputs(
    const nlohmann::json& inputs, std::string_view binary);

// The strings of a binary BYTES tensor: length-prefixed elements to the end of `raw`.
Result<std::vector<std::string>> DecodeKServeBinaryStrings(std::string_view raw,
                                                           std::string_view tensor_name);

// One BYTES element as the binary extension (and gRPC's raw contents) carry it: its 4-byte
// little-endian length, then its bytes.
std::string EncodeKServeBinaryString(std::string_view element);
// Every element of a BYTES tensor so, one after the other, appended to `out`.
void AppendKServeBinaryStrings(const std::vector<std::string>& elements, std::string* out);

// Which outputs the client wants in binary.
class KServeBinaryOutputs {
 public:
  // From the request body's parameters.binary_data_output and its outputs[i].parameters.
  static Result<KServeBinaryOutputs> Read(const nlohmann::json& body);
  bool Binary(const std::string& output) const;
  bool any() const { return all_ || !on_.empty(); }

 private:
  bool all_ = false;
  std::set<std::string> on_, off_;
};

// Makes `res` the answer: `json` alone, or with `binary` after it and the header saying
// where the JSON ends, when `binary_outputs` (some output went binary, even an empty one).
void SetKServeResponseBody(std::string json, std::string binary, bool binary_outputs,
                           HttpResponse* res);

}  // namespace tailcut
