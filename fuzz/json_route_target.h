// The JSON fuzz targets (fuzz_openai_json, fuzz_tei_json, fuzz_kserve_json): the input is the
// body of a POST to fixed routes, dispatched through the same harness as fuzz_http_request, so
// the fuzzer spends its time on one API's schema instead of on HTTP framing.
//
// Thread-safety: none; one per fuzz target.
#pragma once

#include <initializer_list>
#include <string_view>

#include "fuzz/http_harness.h"

namespace tailcut::fuzz {

// POSTs `body` as application/json to each of `targets` (request targets such as
// "/v1/embeddings"), with the header `extra_name: extra_value` when a name is given.
inline void PostJson(HttpHarness& harness, std::initializer_list<std::string_view> targets,
                     std::string_view body, std::string_view extra_name = {},
                     std::string_view extra_value = {}) {
  for (std::string_view target : targets) {
    HttpRequest request;
    request.method(boost::beast::http::verb::post);
    request.target(boost::beast::string_view(target.data(), target.size()));
    request.version(11);
    request.set(boost::beast::http::field::host, "localhost");
    request.set(boost::beast::http::field::content_type, "application/json");
    if (!extra_name.empty()) {
      request.set(boost::beast::string_view(extra_name.data(), extra_name.size()),
                  boost::beast::string_view(extra_value.data(), extra_value.size()));
    }
    request.body().assign(body.data(), body.size());
    request.prepare_payload();
    harness.ServeRequest(std::move(request));
  }
}

}  // namespace tailcut::fuzz
