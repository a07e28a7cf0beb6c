#include "client/loop/summary_writer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/io/checkpoint_util.h"

namespace graphrun {
namespace client {
namespace {

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void PutTag(std::string& out, int field, int wire_type) {
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

void PutBytes(std::string& out, int field, const std::string& bytes) {
  PutTag(out, field, 2);
  PutVarint(out, bytes.size());
  out += bytes;
}

template <typename T>
void PutFixed(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // little-endian host
  out.append(b, sizeof(T));
}

// An Event: wall_time (1, double), step (2, int64), then `tail` (already
// encoded fields).
std::string Event(int64_t step, const std::string& tail) {
  std::string e;
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  PutTag(e, 1, 1);
  PutFixed(e, now);
  if (step != 0) {
    PutTag(e, 2, 0);
    PutVarint(e, static_cast<uint64_t>(step));
  }
  return e + tail;
}

}  // namespace

uint32_t MaskedCrc32c(const char* data, size_t n) {
  const uint32_t crc = checkpoint::Crc32c(0, data, n);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

absl::StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Create(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("summaries: cannot create ", dir, ": ", ec.message()));
  }
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  const int64_t secs = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  std::unique_ptr<EventFileWriter> w(new EventFileWriter());
  // Seconds, host, and (a graphrun suffix) pid and a per-process count:
  // two writers of one process in one second get two files.
  static std::atomic<int> count{0};
  w->filename_ =
      absl::StrCat(dir, "/events.out.tfevents.", secs, ".", host, ".", getpid(), ".", count++);
  w->file_ = std::fopen(w->filename_.c_str(), "wb");
  if (w->file_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("summaries: cannot create ", w->filename_, ": ", std::strerror(errno)));
  }
  std::string version;
  PutBytes(version, 3, "brain.Event:2");
  GR_RETURN_IF_ERROR(w->WriteRecord(Event(0, version)));
  GR_RETURN_IF_ERROR(w->Flush());
  return w;
}

EventFileWriter::~EventFileWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status EventFileWriter::WriteRecord(const std::string& record) {
  std::string framed;
  PutFixed<uint64_t>(framed, record.size());
  const uint32_t len_crc = MaskedCrc32c(framed.data(), 8);
  PutFixed<uint32_t>(framed, len_crc);
  framed += record;
  PutFixed<uint32_t>(framed, MaskedCrc32c(record.data(), record.size()));
  std::lock_guard<std::mutex> l(mu_);
  if (std::fwrite(framed.data(), 1, framed.size(), file_) != framed.size()) {
    return absl::DataLossError(absl::StrCat("summaries: writing ", filename_, " failed"));
  }
  return absl::OkStatus();
}

absl::Status EventFileWriter::WriteScalars(
    int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  std::string summary;
  for (const auto& [tag, v] : values) {
    std::string value;
    PutBytes(value, 1, tag);
    PutTag(value, 2, 5);
    PutFixed(value, static_cast<float>(v));
    PutBytes(summary, 1, value);
  }
  std::string tail;
  PutBytes(tail, 5, summary);
  return WriteRecord(Event(step, tail));
}

absl::Status EventFileWriter::Flush() {
  std::lock_guard<std::mutex> l(mu_);
  if (std::fflush(file_) != 0) {
    return absl::DataLossError(absl::StrCat("summaries: flushing ", filename_, " failed"));
  }
  return absl::OkStatus();
}

SummaryHook::SummaryHook(std::unique_ptr<EventFileWriter> writer, int64_t every,
                         double learning_rate)
    : writer_(std::move(writer)), every_(every < 1 ? 1 : every), learning_rate_(learning_rate) {}

void SummaryHook::AfterStep(const StepInfo& step, const std::vector<std::string>& metric_names) {
  if (!status_.ok() || step.local_step % every_ != 0) return;
  std::vector<std::pair<std::string, double>> values;
  for (size_t i = 0; i < step.metrics.size() && i < metric_names.size(); ++i) {
    values.emplace_back(metric_names[i], step.metrics[i]);
  }
  values.emplace_back("learning_rate", learning_rate_);
  const double dt = step.seconds - last_seconds_;
  if (dt > 0) values.emplace_back("examples_per_sec", (step.examples - last_examples_) / dt);
  last_seconds_ = step.seconds;
  last_examples_ = step.examples;
  status_ = writer_->WriteScalars(step.global_step, values);
  if (status_.ok()) status_ = writer_->Flush();
}

absl::Status SummaryHook::AfterLoop(const ClientSession&) { return status_; }

}  // namespace client
}  // namespace graphrun
