#include "kernels/framework/rendezvous.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace graphrun {

std::string Rendezvous::CreateKey(const std::string& src_device, uint64_t src_incarnation,
                                  const std::string& dst_device, const std::string& edge_name,
                                  const FrameAndIter& fi) {
  return absl::StrCat(src_device, ";", absl::Hex(src_incarnation, absl::kZeroPad16), ";",
                      dst_device, ";", edge_name, ";", fi.frame_id, ":", fi.iter_id);
}

absl::StatusOr<Rendezvous::ParsedKey> Rendezvous::ParseKey(const std::string& key) {
  std::vector<absl::string_view> parts = absl::StrSplit(key, ';');
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("invalid rendezvous key '", key, "': ", why));
  };
  if (parts.size() != 5) return bad("expected 5 ';'-separated parts");
  ParsedKey k;
  k.src_device = std::string(parts[0]);
  if (!absl::SimpleHexAtoi(parts[1], &k.src_incarnation)) return bad("incarnation");
  k.dst_device = std::string(parts[2]);
  k.edge_name = std::string(parts[3]);
  std::vector<absl::string_view> fi = absl::StrSplit(parts[4], ':');
  if (fi.size() != 2 || !absl::SimpleAtoi(fi[0], &k.frame_iter.frame_id) ||
      !absl::SimpleAtoi(fi[1], &k.frame_iter.iter_id)) {
    return bad("frame:iter");
  }
  if (k.src_device.empty() || k.dst_device.empty() || k.edge_name.empty()) {
    return bad("empty device or edge name");
  }
  k.full_key = key;
  return k;
}

absl::Status Rendezvous::Recv(const ParsedKey& key, const Args& args, Tensor* value, bool* is_dead,
                              int64_t timeout_ms) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    absl::Status status;
    Tensor value;
    bool is_dead = false;
  };
  auto st = std::make_shared<State>();
  RecvAsync(key, args, [st](const absl::Status& s, const Tensor& v, bool dead) {
    std::lock_guard<std::mutex> l(st->mu);
    st->status = s;
    st->value = v;
    st->is_dead = dead;
    st->done = true;
    st->cv.notify_all();
  });
  std::unique_lock<std::mutex> l(st->mu);
  if (timeout_ms > 0) {
    if (!st->cv.wait_for(l, std::chrono::milliseconds(timeout_ms), [&] { return st->done; })) {
      return absl::DeadlineExceededError(
          absl::StrCat("timed out after ", timeout_ms, " ms waiting for ", key.full_key));
    }
  } else {
    st->cv.wait(l, [&] { return st->done; });
  }
  *value = st->value;
  *is_dead = st->is_dead;
  return st->status;
}

}  // namespace graphrun
