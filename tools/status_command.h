// `graphrun status ADDRESS`: a running cluster's tasks, devices, sessions,
// steps/s and tensor bytes per peer (docs/cli.md).
#ifndef GRAPHRUN_TOOLS_STATUS_COMMAND_H_
#define GRAPHRUN_TOOLS_STATUS_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/types/span.h"

namespace graphrun {
namespace tools {

// Exit 0 when every task answered, 1 when ADDRESS or any task did not
// (each named on its row), 2 for usage errors.
int StatusCommand(absl::Span<const std::string> args, std::ostream& out, std::ostream& err);
std::string StatusUsage();

}  // namespace tools
}  // namespace graphrun

#endif  // GRAPHRUN_TOOLS_STATUS_COMMAND_H_
