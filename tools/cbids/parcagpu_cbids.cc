// parcagpu-cbids: prints the subscribed-callback table (include/parcagpu/cbid_table.h) as JSON,
// so that Python tests and scripts use the one constexpr table instead of a copy of it
// (tests/integration/harness.py loads it).
#include <cstddef>
#include <cstdio>
#include <nlohmann/json.hpp>

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
    case parcagpu::CbDomain::Nvtx:
      return "nvtx";
  }
  return "?";
}

// The roles' names in the JSON, by CbRole (in its order: EagerLaunch first, ModuleResource last).
// In CbRole's order (include/parcagpu/cbid_table.h).
constexpr const char *kRoleNames[] = {"eager_launch",   "memory_launch", "graph_launch",
                                      "graph_resource", "graph_upload",  "graph_instantiate",
                                      "module_resource"};
static_assert(sizeof(kRoleNames) / sizeof(kRoleNames[0]) ==
              static_cast<size_t>(parcagpu::CbRole::ModuleResource) + 1);

const char *role_name(parcagpu::CbRole r) {
  const auto i = static_cast<size_t>(r);
  return i < sizeof(kRoleNames) / sizeof(kRoleNames[0]) ? kRoleNames[i] : "?";
}

}  // namespace

int main() {
  using Json = nlohmann::ordered_json;
  Json callbacks = Json::array();
  for (const parcagpu::SubscribedCallback &c : parcagpu::kSubscribedCallbacks) {
    // Resources are not launches: no probe carries them, so they have no signed cbid.
    const Json signed_cbid = c.domain == parcagpu::CbDomain::Resource
                                 ? Json(nullptr)
                                 : Json(parcagpu::signed_cbid(c.domain, c.cbid));
    callbacks.push_back(Json{{"domain", domain_name(c.domain)},
                             {"cbid", c.cbid},
                             {"signed_cbid", signed_cbid},
                             {"role", role_name(c.role)},
                             {"name", c.name}});
  }
  std::printf("%s\n", Json{{"callbacks", callbacks}}.dump().c_str());
  return 0;
}
