// Admin routes, always behind an admin key (see auth.h):
//   GET    /admin/cache                      cache tiers' state and counters
//   DELETE /admin/cache/{model}              flush a model's entries from every tier
//   PUT    /admin/models/{name}/precision    {"variant": "int8"} pins the variant serving
//                                            unpinned requests; {"variant": null} unpins
//   POST   /admin/models/{name}/reload       re-read the model folder and swap in the new
//                                            files without dropping requests
//
// Thread-safety: as for the other routes.
#pragma once

#include "core/inference_service.h"
#include "server/api_context.h"
#include "server/router.h"

namespace tailcut {

void AddAdminRoutes(Router& router, ApiContext& context, InferenceService& service);

}  // namespace tailcut
