// Which files the kernels of a server may touch (docs/security.md). A
// `graphrun server` runs graphs that anyone holding the cluster's
// credentials sends it; its file-touching ops (SaveV2, RestoreV2,
// MergeV2Checkpoints, the dataset readers and CacheDataset) work only under
// the directories of --allowed_dirs, and without it touch no file.
// In-process sessions (`graphrun run` without --target, DirectSession)
// have no policy: they run the user's own graph in the user's process.
//
// Paths are made absolute (against the working directory) and resolved
// through every symbolic link that exists, so "allowed/../../etc" and a
// link inside an allowed directory pointing out of it are both outside.
// (A link created after the check is not caught: the policy keeps out
// graphs, not local users who can already write inside an allowed
// directory.)
#ifndef GRAPHRUN_KERNELS_FRAMEWORK_FILE_ACCESS_H_
#define GRAPHRUN_KERNELS_FRAMEWORK_FILE_ACCESS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace graphrun {

class FileAccessPolicy {
 public:
  // Only under `dirs` (none: no file at all). InvalidArgument for an
  // empty or relative-to-nothing entry.
  static absl::StatusOr<std::shared_ptr<const FileAccessPolicy>> Confined(
      const std::vector<std::string>& dirs);

  // OK when `path` (a file, or a checkpoint prefix whose files share its
  // directory) lies under an allowed directory; else PermissionDenied
  // naming the path and the allowed directories.
  absl::Status Check(const std::string& path) const;
  const std::vector<std::string>& dirs() const { return dirs_; }

 private:
  explicit FileAccessPolicy(std::vector<std::string> dirs) : dirs_(std::move(dirs)) {}
  std::vector<std::string> dirs_;  // canonical, absolute
};

// The path made absolute and resolved through existing links (lexically
// normalized beyond them).
std::string ResolvePath(const std::string& path);

class OpKernelContext;
// The policy of the device `ctx` runs on, applied to `path`: OK when the
// device has none (an in-process session). Callers annotate with the node.
absl::Status CheckFileAccess(OpKernelContext* ctx, const std::string& path);

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_FRAMEWORK_FILE_ACCESS_H_
