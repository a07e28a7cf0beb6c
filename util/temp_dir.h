// Private temporary directories and files where the user keeps them:
// $TMPDIR when it names an absolute path (a scheduler's per-job scratch, as
// Slurm and many sites set it), else /tmp.
#ifndef GRAPHRUN_UTIL_TEMP_DIR_H_
#define GRAPHRUN_UTIL_TEMP_DIR_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace graphrun {

// $TMPDIR (absolute, trailing slashes removed), else "/tmp".
std::string TempRoot();

// A new directory TempRoot()/<prefix>XXXXXX (mode 0700). Internal naming
// the path it tried and why on failure.
absl::StatusOr<std::string> MakeTempDir(absl::string_view prefix);

// A new empty file TempRoot()/<prefix>XXXXXX (mode 0600), closed.
absl::StatusOr<std::string> MakeTempFile(absl::string_view prefix);

}  // namespace graphrun

#endif  // GRAPHRUN_UTIL_TEMP_DIR_H_
