// parcagpu-cbids: prints the subscribed-callback table (include/parcagpu/cbid_table.h) as JSON,
// so that Python tests and scripts use the one constexpr table instead of a copy of it
// (tests/integration/harness.py loads it).
#include <cstdio>

#include "parcagpu/cbid_table.h"

namespace {

const char *domain_name(parcagpu::CbDomain d) {
  switch (d) {
    case parcagpu::CbDomain::Driver:
      return "driver";
    case parcagpu::CbDomain::Runtime:
      return "runtime";
    case parcagpu::CbDomain::Resource:
      return "resource";
  }
  return "?";
}

const char *role_name(parcagpu::CbRole r) {
  switch (r) {
    case parcagpu::CbRole::EagerLaunch:
      return "eager_launch";
    case parcagpu::CbRole::GraphLaunch:
      return "graph_launch";
    case parcagpu::CbRole::GraphResource:
      return "graph_resource";
    case parcagpu::CbRole::GraphUpload:
      return "graph_upload";
    case parcagpu::CbRole::GraphInstantiate:
      return "graph_instantiate";
    case parcagpu::CbRole::ModuleResource:
      return "module_resource";
  }
  return "?";
}

}  // namespace

int main() {
  std::printf("{\"callbacks\":[");
  for (size_t i = 0; i < parcagpu::kNumSubscribedCallbacks; i++) {
    const parcagpu::SubscribedCallback &c = parcagpu::kSubscribedCallbacks[i];
    char signed_cbid[16] = "null";  // resources are not launches: no probe carries them
    if (c.domain != parcagpu::CbDomain::Resource)
      std::snprintf(signed_cbid, sizeof signed_cbid, "%d", parcagpu::signed_cbid(c.domain, c.cbid));
    std::printf(
        "%s{\"domain\":\"%s\",\"cbid\":%u,\"signed_cbid\":%s,\"role\":\"%s\",\"name\":\"%s\"}",
        i ? "," : "", domain_name(c.domain), c.cbid, signed_cbid, role_name(c.role), c.name);
  }
  std::printf("]}\n");
  return 0;
}
