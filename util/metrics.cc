#include "util/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace graphrun {
namespace {

const std::vector<double>& Buckets() {
  static const std::vector<double> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                               0.5,   1,      2.5,   5,    10,    30,   60};
  return kBuckets;
}

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  // Integers exactly; otherwise the shortest of 15 or 17 digits that reads
  // back as the same double.
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
    return buf;
  }
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// Joins the family's labels with one more ("le").
std::string WithLabel(const std::string& labels, const std::string& key, const std::string& v) {
  std::string extra = absl::StrCat(key, "=\"", v, "\"");
  if (labels.empty()) return absl::StrCat("{", extra, "}");
  return absl::StrCat(labels.substr(0, labels.size() - 1), ",", extra, "}");
}

}  // namespace

std::string FormatMetricLabels(const MetricLabels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out += ",";
    absl::StrAppend(&out, labels[i].first, "=\"");
    for (char c : labels[i].second) {
      if (c == '\\' || c == '"') out += '\\';
      if (c == '\n') {
        out += "\\n";
        continue;
      }
      out += c;
    }
    out += "\"";
  }
  return out + "}";
}

Metrics& Metrics::Get() {
  static Metrics* const m = new Metrics();
  return *m;
}

Metrics::Family& Metrics::FamilyLocked(const std::string& name, const std::string& type) {
  auto [it, added] = families_.try_emplace(name);
  if (added) it->second.type = type;
  return it->second;
}

void Metrics::Describe(const std::string& name, const std::string& type, const std::string& help) {
  std::lock_guard<std::mutex> l(mu_);
  Family& f = FamilyLocked(name, type);
  f.type = type;
  f.help = help;
}

void Metrics::Increment(const std::string& name, const MetricLabels& labels, double by) {
  const std::string key = FormatMetricLabels(labels);
  std::lock_guard<std::mutex> l(mu_);
  FamilyLocked(name, "counter").values[key] += by;
}

void Metrics::Observe(const std::string& name, const MetricLabels& labels, double seconds) {
  const std::string key = FormatMetricLabels(labels);
  std::lock_guard<std::mutex> l(mu_);
  Histogram& h = FamilyLocked(name, "histogram").histograms[key];
  if (h.counts.empty()) h.counts.assign(Buckets().size() + 1, 0);
  size_t b = 0;
  while (b < Buckets().size() && seconds > Buckets()[b]) ++b;
  h.counts[b] += 1;
  h.sum += seconds;
  h.count += 1;
}

void Metrics::Gauge(const std::string& name, const std::string& help,
                    std::function<double()> read) {
  std::lock_guard<std::mutex> l(mu_);
  Family& f = FamilyLocked(name, "gauge");
  f.type = "gauge";
  f.help = help;
  f.gauge = std::move(read);
}

double Metrics::Value(const std::string& name, const MetricLabels& labels) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return 0;
  auto v = it->second.values.find(FormatMetricLabels(labels));
  return v == it->second.values.end() ? 0 : v->second;
}

double Metrics::Sum(const std::string& name) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return 0;
  double total = 0;
  for (const auto& [labels, v] : it->second.values) total += v;
  return total;
}

std::string Metrics::Exposition() const {
  std::lock_guard<std::mutex> l(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    if (!f.help.empty()) absl::StrAppend(&out, "# HELP ", name, " ", f.help, "\n");
    absl::StrAppend(&out, "# TYPE ", name, " ", f.type, "\n");
    if (f.gauge) absl::StrAppend(&out, name, " ", Number(f.gauge()), "\n");
    for (const auto& [labels, v] : f.values)
      absl::StrAppend(&out, name, labels, " ", Number(v), "\n");
    for (const auto& [labels, h] : f.histograms) {
      double cumulative = 0;
      for (size_t b = 0; b < Buckets().size(); ++b) {
        cumulative += h.counts[b];
        absl::StrAppend(&out, name, "_bucket", WithLabel(labels, "le", Number(Buckets()[b])), " ",
                        Number(cumulative), "\n");
      }
      absl::StrAppend(&out, name, "_bucket", WithLabel(labels, "le", "+Inf"), " ", Number(h.count),
                      "\n");
      absl::StrAppend(&out, name, "_sum", labels, " ", Number(h.sum), "\n");
      absl::StrAppend(&out, name, "_count", labels, " ", Number(h.count), "\n");
    }
  }
  return out;
}

}  // namespace graphrun
