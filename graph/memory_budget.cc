#include "graph/memory_budget.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace graphrun {
namespace {

std::atomic<int64_t> g_in_use{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_tensors{0};
std::atomic<int64_t> g_limit{0};  // 0: not set yet (the default)
std::atomic<int64_t> g_cap{0};

}  // namespace

int64_t PhysicalMemoryBytes() {
  // Read once: sysconf(_SC_PHYS_PAGES) is a sysinfo(2) call, and every
  // checked allocation asks (GetMemoryLimits) until limits are set.
  static const int64_t bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return int64_t{8} << 30;  // unknown: assume 8 GiB
    return static_cast<int64_t>(pages) * page;
  }();
  return bytes;
}

MemoryLimits DefaultMemoryLimits() {
  MemoryLimits m;
  m.limit_bytes = PhysicalMemoryBytes() / 10 * 8;
  m.max_allocation_bytes = m.limit_bytes / 2;
  return m;
}

void SetMemoryLimits(int64_t limit_bytes, int64_t max_allocation_bytes) {
  const MemoryLimits d = DefaultMemoryLimits();
  const int64_t limit = limit_bytes > 0 ? limit_bytes : d.limit_bytes;
  const int64_t cap = max_allocation_bytes > 0 ? max_allocation_bytes
                      : limit_bytes > 0        ? limit / 2
                                               : d.max_allocation_bytes;
  g_limit.store(limit);
  g_cap.store(cap);
}

MemoryLimits GetMemoryLimits() {
  if (g_limit.load() == 0) return DefaultMemoryLimits();
  MemoryLimits m;
  m.limit_bytes = g_limit.load();
  m.max_allocation_bytes = g_cap.load();
  return m;
}

int64_t TensorBytesInUse() { return g_in_use.load(std::memory_order_relaxed); }
int64_t PeakTensorBytes() { return g_peak.load(std::memory_order_relaxed); }
int64_t TensorsInUse() { return g_tensors.load(std::memory_order_relaxed); }

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrCat(bytes, " bytes") : absl::StrFormat("%.1f %s", v, units[u]);
}

absl::StatusOr<int64_t> ParseMemorySize(absl::string_view text, absl::string_view flag) {
  std::string s = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", text,
                     ": expected bytes (e.g. 4294967296, 512M, 8G) or a percentage "
                     "of physical memory (e.g. 50%)"));
  };
  if (s.empty()) return bad();
  double scale = 1;
  if (s.back() == '%') {
    s.pop_back();
    scale = PhysicalMemoryBytes() / 100.0;
  } else {
    // "GiB", "GB", "G" are all 2^30 here.
    if (absl::EndsWith(s, "ib")) {
      s.resize(s.size() - 2);
    } else if (s.size() > 1 && s.back() == 'b' && std::isalpha(s[s.size() - 2])) {
      s.pop_back();
    }
    switch (s.empty() ? '\0' : s.back()) {
      case 'k':
        scale = 1024.0;
        break;
      case 'm':
        scale = 1024.0 * 1024;
        break;
      case 'g':
        scale = 1024.0 * 1024 * 1024;
        break;
      case 't':
        scale = 1024.0 * 1024 * 1024 * 1024;
        break;
      default:
        break;
    }
    if (scale > 1) s.pop_back();
  }
  double v = 0;
  if (!absl::SimpleAtod(s, &v) || !(v > 0) || !std::isfinite(v)) return bad();
  const double bytes = v * scale;
  if (bytes < 1 || bytes > 9.0e18) return bad();
  return static_cast<int64_t>(bytes);
}

namespace memory_internal {

namespace {

void NotePeak(int64_t now) {
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

// Counts `bytes` in unless that passes a limit.
absl::Status ReserveChecked(int64_t bytes, absl::string_view what) {
  const MemoryLimits m = GetMemoryLimits();
  if (bytes > m.max_allocation_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", what, ": ", bytes, " bytes (", HumanBytes(bytes),
                     ") is over the per-allocation cap of ", HumanBytes(m.max_allocation_bytes),
                     " (--max_allocation_bytes)"));
  }
  int64_t now = g_in_use.load(std::memory_order_relaxed);
  while (true) {
    if (now + bytes > m.limit_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot allocate ", what, ": ", bytes, " bytes (", HumanBytes(bytes),
          ") more would take this process's tensors to ", HumanBytes(now + bytes),
          ", over its memory limit of ", HumanBytes(m.limit_bytes), " (--memory_limit)"));
    }
    if (g_in_use.compare_exchange_weak(now, now + bytes, std::memory_order_relaxed)) break;
  }
  NotePeak(now + bytes);
  return absl::OkStatus();
}

}  // namespace

absl::Status Reserve(int64_t bytes, bool checked, absl::string_view what) {
  if (checked) {
    absl::Status s = ReserveChecked(bytes, what);
    if (!s.ok()) return s;
  } else {
    NotePeak(g_in_use.fetch_add(bytes, std::memory_order_relaxed) + bytes);
  }
  if (bytes > 0) g_tensors.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

void Release(int64_t bytes) {
  g_in_use.fetch_sub(bytes, std::memory_order_relaxed);
  if (bytes > 0) g_tensors.fetch_sub(1, std::memory_order_relaxed);
}

absl::Status ReserveMore(int64_t bytes, int64_t tensor_bytes, absl::string_view what) {
  const MemoryLimits m = GetMemoryLimits();
  if (tensor_bytes > m.max_allocation_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", what, ": the tensor would hold ", tensor_bytes, " bytes (",
                     HumanBytes(tensor_bytes), "), over the per-allocation cap of ",
                     HumanBytes(m.max_allocation_bytes), " (--max_allocation_bytes)"));
  }
  return ReserveChecked(bytes, what);
}

void ReleaseMore(int64_t bytes) { g_in_use.fetch_sub(bytes, std::memory_order_relaxed); }

}  // namespace memory_internal
}  // namespace graphrun
