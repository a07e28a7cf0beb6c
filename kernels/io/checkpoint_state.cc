// The "checkpoint" state file of a directory (latest checkpoint, keep last
// N) and DeleteCheckpoint. See checkpoint_util.h.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "graph/status.h"
#include "kernels/io/checkpoint_internal.h"
#include "kernels/io/checkpoint_util.h"

namespace graphrun {
namespace checkpoint {

namespace {

constexpr char kStateFile[] = "checkpoint";
constexpr char kFinalLine[] = "# graphrun: final";

}  // namespace

absl::Status DeleteCheckpoint(const std::string& prefix) {
  const std::string dir = Dirname(prefix);
  const std::string base = Basename(prefix) + ".";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return absl::OkStatus();
    return IoError("cannot list", dir, errno);
  }
  std::vector<std::string> doomed;
  while (struct dirent* ent = ::readdir(d)) {
    absl::string_view name = ent->d_name;
    if (!absl::ConsumePrefix(&name, base)) continue;
    bool ours = name == "index" || absl::StartsWith(name, absl::StrCat("index", kTempMarker)) ||
                (absl::StartsWith(name, "data-") && absl::StrContains(name, "-of-"));
    if (ours) doomed.push_back(JoinPath(dir, ent->d_name));
  }
  ::closedir(d);
  absl::Status status;
  for (const std::string& f : doomed) {
    if (::unlink(f.c_str()) != 0 && errno != ENOENT && status.ok()) {
      status = IoError("cannot delete", f, errno);
    }
  }
  return status;
}

// ---------------------------------------------------------------------------
// The checkpoint state file.

namespace {

// How the state file of `dir` spells `path`: relative to `dir` when inside
// it, else absolute (a path relative to the working directory would be read
// back relative to `dir`).
std::string StatePath(const std::string& dir, const std::string& path) {
  std::string d = std::string(absl::StripSuffix(dir, "/")) + "/";
  if (absl::StartsWith(path, d) && path.size() > d.size()) return path.substr(d.size());
  if (absl::StartsWith(path, "/")) return path;
  char cwd[4096];
  if (::getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  return JoinPath(cwd, path);
}

}  // namespace

absl::StatusOr<CheckpointState> ReadCheckpointState(const std::string& dir) {
  const std::string file = JoinPath(dir, kStateFile);
  auto text = ReadFileToString(file);
  if (!text.ok()) return text.status();
  auto corrupt = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("corrupt checkpoint state file ", file, ": ", why));
  };
  CheckpointState state;
  bool have_model = false;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipWhitespace())) {
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "#")) {
      if (absl::StripAsciiWhitespace(line) == kFinalLine) state.final = true;
      continue;  // a comment
    }
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) return corrupt(absl::StrCat("line '", line, "'"));
    absl::string_view key = absl::StripAsciiWhitespace(line.substr(0, colon));
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    const bool model = key == "model_checkpoint_path";
    if (!model && key != "all_model_checkpoint_paths") continue;  // e.g. timestamps
    std::string path;
    if (value.size() < 2 || value.front() != '"' || value.back() != '"' ||
        !absl::CUnescape(value.substr(1, value.size() - 2), &path)) {
      return corrupt(absl::StrCat("bad value in line '", line, "'"));
    }
    path = JoinPath(dir, path);
    if (model) {
      state.model_checkpoint_path = path;
      have_model = true;
    } else {
      state.all_model_checkpoint_paths.push_back(path);
    }
  }
  if (!have_model) return corrupt("no model_checkpoint_path");
  return state;
}

absl::Status WriteCheckpointState(const std::string& dir, const CheckpointState& state) {
  GR_RETURN_IF_ERROR(RecursivelyCreateDir(dir));
  std::string text =
      absl::StrCat("model_checkpoint_path: \"",
                   absl::CEscape(StatePath(dir, state.model_checkpoint_path)), "\"\n");
  for (const std::string& p : state.all_model_checkpoint_paths) {
    absl::StrAppend(&text, "all_model_checkpoint_paths: \"", absl::CEscape(StatePath(dir, p)),
                    "\"\n");
  }
  if (state.final) absl::StrAppend(&text, kFinalLine, "\n");
  return WriteFileAtomically(JoinPath(dir, kStateFile), text);
}

absl::StatusOr<std::string> LatestCheckpoint(const std::string& dir) {
  GR_ASSIGN_OR_RETURN(CheckpointState state, ReadCheckpointState(dir));
  if (!BundleReader::Exists(state.model_checkpoint_path)) {
    return absl::NotFoundError(
        absl::StrCat("the checkpoint state of ", dir, " names ", state.model_checkpoint_path,
                     " but ", IndexFilename(state.model_checkpoint_path), " does not exist"));
  }
  return state.model_checkpoint_path;
}

absl::Status UpdateCheckpointState(const std::string& dir, const std::string& prefix,
                                   int keep_last_n) {
  CheckpointState state;
  auto old = ReadCheckpointState(dir);
  if (old.ok()) {
    state = std::move(*old);
  } else if (!absl::IsNotFound(old.status())) {
    return old.status();
  }
  const std::string& full = prefix;
  auto& all = state.all_model_checkpoint_paths;
  all.erase(std::remove(all.begin(), all.end(), full), all.end());
  all.push_back(full);
  std::vector<std::string> dropped;
  if (keep_last_n > 0 && all.size() > static_cast<size_t>(keep_last_n)) {
    dropped.assign(all.begin(), all.end() - keep_last_n);
    all.erase(all.begin(), all.end() - keep_last_n);
  }
  state.model_checkpoint_path = full;
  state.final = false;
  // State first: it never names a deleted checkpoint.
  GR_RETURN_IF_ERROR(WriteCheckpointState(dir, state));
  absl::Status status;
  for (const std::string& p : dropped) {
    absl::Status s = DeleteCheckpoint(p);
    if (status.ok()) status = s;
  }
  return status;
}

absl::Status MarkFinalCheckpoint(const std::string& dir, const std::string& prefix) {
  GR_ASSIGN_OR_RETURN(CheckpointState state, ReadCheckpointState(dir));
  if (state.model_checkpoint_path != prefix) {
    return absl::FailedPreconditionError(absl::StrCat("cannot mark ", prefix,
                                                      " final: ", state.model_checkpoint_path,
                                                      " is the newest checkpoint of ", dir));
  }
  if (state.final) return absl::OkStatus();
  state.final = true;
  return WriteCheckpointState(dir, state);
}

}  // namespace checkpoint
}  // namespace graphrun
