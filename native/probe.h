// The health check's connection (probe.cc), registered on the addon's exports beside the relay.
#pragma once
#include <node_api.h>

namespace roomgate {
// Adds probeOpen and probeClose to `exports`.
void DefineProbe(napi_env env, napi_value exports);
}  // namespace roomgate
