#include "kernels/framework/resource_mgr.h"

#include <algorithm>

namespace graphrun {

void ResourceMgr::Cleanup(const std::string& container) {
  std::vector<std::shared_ptr<ResourceBase>> dropped;
  {
    std::lock_guard<std::mutex> l(mu_);
    const std::string& c = C(container);
    for (auto it = resources_.begin(); it != resources_.end();) {
      if (std::get<0>(it->first) == c) {
        dropped_.insert({c, std::get<1>(it->first)});
        dropped.push_back(std::move(it->second));
        it = resources_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& r : dropped) r->Dropped();
}

void ResourceMgr::Clear() {
  std::vector<std::shared_ptr<ResourceBase>> dropped;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [k, r] : resources_) {
      dropped_.insert({std::get<0>(k), std::get<1>(k)});
      dropped.push_back(std::move(r));
    }
    resources_.clear();
  }
  for (const auto& r : dropped) r->Dropped();
}

std::vector<std::string> ResourceMgr::List() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> out;
  for (const auto& [k, v] : resources_) {
    out.push_back(absl::StrCat(std::get<0>(k), "/", std::get<1>(k)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace graphrun
