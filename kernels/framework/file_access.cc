#include "kernels/framework/file_access.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/framework/device_base.h"
#include "kernels/framework/op_kernel.h"

namespace graphrun {

std::string ResolvePath(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) p = std::filesystem::path(path);
  std::filesystem::path resolved = std::filesystem::weakly_canonical(p, ec);
  if (ec) resolved = p.lexically_normal();
  return resolved.lexically_normal().string();
}

absl::StatusOr<std::shared_ptr<const FileAccessPolicy>> FileAccessPolicy::Confined(
    const std::vector<std::string>& dirs) {
  std::vector<std::string> resolved;
  for (const std::string& d : dirs) {
    if (d.empty()) return absl::InvalidArgumentError("--allowed_dirs: an empty directory name");
    std::string r = ResolvePath(d);
    while (r.size() > 1 && r.back() == '/') r.pop_back();
    resolved.push_back(r);
  }
  return std::shared_ptr<const FileAccessPolicy>(new FileAccessPolicy(std::move(resolved)));
}

absl::Status FileAccessPolicy::Check(const std::string& path) const {
  if (!path.empty()) {
    const std::string r = ResolvePath(path);
    for (const std::string& d : dirs_) {
      if (d == "/" || r == d ||
          (r.size() > d.size() && r.compare(0, d.size(), d) == 0 && r[d.size()] == '/')) {
        return absl::OkStatus();
      }
    }
  }
  if (dirs_.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "path '", path, "': this server touches no file (start it with --allowed_dirs=DIR,...)"));
  }
  return absl::PermissionDeniedError(
      absl::StrCat("path '", path, "' is outside the directories this server may touch (",
                   absl::StrJoin(dirs_, ", "), "; --allowed_dirs)"));
}

absl::Status CheckFileAccess(OpKernelContext* ctx, const std::string& path) {
  const DeviceBase* device = ctx->device();
  const FileAccessPolicy* policy = device != nullptr ? device->file_access() : nullptr;
  return policy == nullptr ? absl::OkStatus() : policy->Check(path);
}

}  // namespace graphrun
