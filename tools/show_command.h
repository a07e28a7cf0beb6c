// `graphrun show DIR`: a SavedModel's tag sets, signatures, and each
// input and output with its dtype, shape and tensor name, laid out as
// `saved_model_cli show --dir DIR --all` prints them.
#ifndef GRAPHRUN_TOOLS_SHOW_COMMAND_H_
#define GRAPHRUN_TOOLS_SHOW_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/types/span.h"
#include "graph/proto/meta_graph.pb.h"

namespace graphrun {
namespace tools {

// The text `graphrun show` prints for `model`.
std::string ShowSavedModel(const tensorflow::SavedModel& model);

// Exit 0, 1 when DIR is not a readable SavedModel, 2 for usage errors.
int ShowCommand(absl::Span<const std::string> args, std::ostream& out, std::ostream& err);
std::string ShowUsage();

}  // namespace tools
}  // namespace graphrun

#endif  // GRAPHRUN_TOOLS_SHOW_COMMAND_H_
