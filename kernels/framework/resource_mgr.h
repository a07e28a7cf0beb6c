// Per-task store of stateful resources (variables, queues, iterators),
// keyed by (container, name, C++ type). Resources outlive steps and
// sessions; that is what lets several clients share one parameter server.
//
// Thread-safe.
#ifndef GRAPHRUN_KERNELS_FRAMEWORK_RESOURCE_MGR_H_
#define GRAPHRUN_KERNELS_FRAMEWORK_RESOURCE_MGR_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <typeindex>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace graphrun {

class ResourceBase {
 public:
  virtual ~ResourceBase() = default;
  virtual std::string DebugString() const = 0;
  // Called once the resource has left its manager through Cleanup or Clear
  // (a session Reset), outside the manager's lock. An op waiting on it
  // (a dequeue, a take) would otherwise wait for a change that can no
  // longer come: resources with waiters fail them here.
  virtual void Dropped() {}
};

class ResourceMgr {
 public:
  explicit ResourceMgr(std::string default_container = "localhost")
      : default_container_(std::move(default_container)) {}
  const std::string& default_container() const { return default_container_; }

  // AlreadyExists if (container, name, T) is taken.
  template <typename T>
  absl::Status Create(const std::string& container, const std::string& name,
                      std::shared_ptr<T> resource);
  // NotFound naming the resource; Aborted when Cleanup or Clear dropped it
  // and nothing made it again (an op of a step that began before a Reset).
  template <typename T>
  absl::StatusOr<std::shared_ptr<T>> Lookup(const std::string& container,
                                            const std::string& name) const;
  // Finds, or creates with `creator` (called under the manager's lock, so at
  // most once per key).
  template <typename T>
  absl::StatusOr<std::shared_ptr<T>> LookupOrCreate(
      const std::string& container, const std::string& name,
      const std::function<absl::StatusOr<std::shared_ptr<T>>()>& creator);
  // NotFound if absent.
  template <typename T>
  absl::Status Delete(const std::string& container, const std::string& name);
  // Drops every resource in `container` (Clear: in every container), then
  // calls Dropped() on each.
  void Cleanup(const std::string& container);
  void Clear();
  // "container/name" of every resource, sorted.
  std::vector<std::string> List() const;

 private:
  using Key = std::tuple<std::string, std::string, std::type_index>;
  const std::string& C(const std::string& c) const { return c.empty() ? default_container_ : c; }
  std::string default_container_;
  mutable std::mutex mu_;
  std::map<Key, std::shared_ptr<ResourceBase>> resources_;
  // (container, name) of what Cleanup or Clear dropped, until it is made again.
  std::set<std::pair<std::string, std::string>> dropped_;
};

template <typename T>
absl::Status ResourceMgr::Create(const std::string& container, const std::string& name,
                                 std::shared_ptr<T> resource) {
  std::lock_guard<std::mutex> l(mu_);
  Key k{C(container), name, std::type_index(typeid(T))};
  if (resources_.count(k)) {
    return absl::AlreadyExistsError(
        absl::StrCat("resource ", C(container), "/", name, " already exists"));
  }
  dropped_.erase({C(container), name});
  resources_[k] = std::move(resource);
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<std::shared_ptr<T>> ResourceMgr::Lookup(const std::string& container,
                                                       const std::string& name) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = resources_.find(Key{C(container), name, std::type_index(typeid(T))});
  if (it == resources_.end()) {
    if (dropped_.count({C(container), name})) {
      return absl::AbortedError(
          absl::StrCat("resource ", C(container), "/", name, " was reset (its container dropped)"));
    }
    return absl::NotFoundError(
        absl::StrCat("resource ", C(container), "/", name, " does not exist"));
  }
  return std::static_pointer_cast<T>(it->second);
}

template <typename T>
absl::StatusOr<std::shared_ptr<T>> ResourceMgr::LookupOrCreate(
    const std::string& container, const std::string& name,
    const std::function<absl::StatusOr<std::shared_ptr<T>>()>& creator) {
  std::lock_guard<std::mutex> l(mu_);
  Key k{C(container), name, std::type_index(typeid(T))};
  auto it = resources_.find(k);
  if (it != resources_.end()) return std::static_pointer_cast<T>(it->second);
  auto r = creator();
  if (!r.ok()) return r.status();
  dropped_.erase({C(container), name});
  resources_[k] = *r;
  return *r;
}

template <typename T>
absl::Status ResourceMgr::Delete(const std::string& container, const std::string& name) {
  std::lock_guard<std::mutex> l(mu_);
  if (resources_.erase(Key{C(container), name, std::type_index(typeid(T))}) == 0) {
    return absl::NotFoundError(
        absl::StrCat("resource ", C(container), "/", name, " does not exist"));
  }
  return absl::OkStatus();
}

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_FRAMEWORK_RESOURCE_MGR_H_
