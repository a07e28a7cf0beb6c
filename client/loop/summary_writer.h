// TensorBoard event files, written as TensorFlow's summary writers do, so
// TensorBoard reads them:
//   * the file DIR/events.out.tfevents.<seconds>.<host> is a sequence of
//     TFRecords: uint64 length, masked CRC32C of the length, the record,
//     masked CRC32C of the record (little-endian; mask: rotate right 15,
//     plus 0xa282ead8);
//   * each record is an Event proto at TensorFlow's field numbers
//     (wall_time = 1 double, step = 2 int64, file_version = 3 string,
//     summary = 5); the first carries file_version "brain.Event:2", later
//     ones a Summary (value = 1) of Values (tag = 1, simple_value = 2
//     float).
//
// SummaryHook writes the training loop's scalars every N steps: loss,
// accuracy, learning rate and examples/s.
#ifndef GRAPHRUN_CLIENT_LOOP_SUMMARY_WRITER_H_
#define GRAPHRUN_CLIENT_LOOP_SUMMARY_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "client/loop/training_loop.h"

namespace graphrun {
namespace client {

// TFRecord's masked CRC32C.
uint32_t MaskedCrc32c(const char* data, size_t n);

class EventFileWriter {
 public:
  // Creates `dir` (and its parents) and a new event file in it, starting
  // with the file_version event. FailedPrecondition naming the path when
  // it cannot be written.
  static absl::StatusOr<std::unique_ptr<EventFileWriter>> Create(const std::string& dir);
  ~EventFileWriter();

  // One event at `step` holding a simple_value per (tag, value).
  absl::Status WriteScalars(int64_t step,
                            const std::vector<std::pair<std::string, double>>& values);
  absl::Status Flush();
  const std::string& filename() const { return filename_; }

 private:
  EventFileWriter() = default;
  absl::Status WriteRecord(const std::string& record);

  std::mutex mu_;
  std::FILE* file_ = nullptr;
  std::string filename_;
};

// After every `every` steps: "loss", "accuracy" (metrics 0 and 1, when
// the loop has them), "learning_rate" and "examples_per_sec" at the global
// step. Errors writing end the run at its next AfterLoop.
class SummaryHook : public TrainingHook {
 public:
  SummaryHook(std::unique_ptr<EventFileWriter> writer, int64_t every, double learning_rate);
  void AfterStep(const StepInfo& step, const std::vector<std::string>& metric_names) override;
  absl::Status AfterLoop(const ClientSession& session) override;

 private:
  std::unique_ptr<EventFileWriter> writer_;
  int64_t every_;
  double learning_rate_;
  int64_t last_examples_ = 0;
  double last_seconds_ = 0;
  absl::Status status_;
};

}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_LOOP_SUMMARY_WRITER_H_
