// `graphrun train`: the flags of the model-zoo trainer
// (client/trainer/trainer.h, which documents the modes), and its output:
// progress lines, then one JSON object as the last line
// (TrainResultToJson; docs/cli.md).
#ifndef GRAPHRUN_TOOLS_TRAIN_COMMAND_H_
#define GRAPHRUN_TOOLS_TRAIN_COMMAND_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/trainer/trainer.h"

namespace graphrun {
namespace tools {

using client::trainer::TrainConfig;
using client::trainer::TrainResult;

// Parses the flags. InvalidArgument (a usage error) naming the flag.
absl::StatusOr<TrainConfig> ParseTrainFlags(absl::Span<const std::string> args);

// One line: {"test_accuracy": …, "global_step": …, "examples_per_sec": …,
// "restored_from_step": null|N, …}.
std::string TrainResultToJson(const TrainConfig& config, const TrainResult& result);

int TrainCommand(absl::Span<const std::string> args, std::ostream& out, std::ostream& err);
std::string TrainUsage();

}  // namespace tools
}  // namespace graphrun

#endif  // GRAPHRUN_TOOLS_TRAIN_COMMAND_H_
