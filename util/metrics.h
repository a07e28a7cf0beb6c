// Process-wide metrics in Prometheus' text format (docs/operations.md).
// Every series is named graphrun_*. Counters and histograms are kept here;
// gauges are read from callbacks when scraped.
//
//   Metrics::Get().Increment("graphrun_rpcs_total", {{"method", m}, {"code", c}});
//   Metrics::Get().Observe("graphrun_step_seconds", {}, 0.012);
//   std::string text = Metrics::Get().Exposition();
//
// Thread-safe.
#ifndef GRAPHRUN_UTIL_METRICS_H_
#define GRAPHRUN_UTIL_METRICS_H_

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace graphrun {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
 public:
  static Metrics& Get();

  // Declares a family (its # HELP line); undeclared families are
  // declared on first use with an empty help.
  void Describe(const std::string& name, const std::string& type, const std::string& help);
  void Increment(const std::string& name, const MetricLabels& labels, double by = 1);
  // A histogram observation in seconds (buckets 1 ms .. 60 s).
  void Observe(const std::string& name, const MetricLabels& labels, double seconds);
  // A gauge read when scraped.
  void Gauge(const std::string& name, const std::string& help, std::function<double()> read);

  // The text exposition format 0.0.4.
  std::string Exposition() const;
  // One counter's value; 0 when absent.
  double Value(const std::string& name, const MetricLabels& labels) const;
  // A counter's total over all its label sets; 0 when absent.
  double Sum(const std::string& name) const;

 private:
  struct Histogram {
    std::vector<double> counts;  // per bucket, not cumulative
    double sum = 0;
    double count = 0;
  };
  struct Family {
    std::string type = "counter", help;
    std::map<std::string, double> values;         // label text -> value
    std::map<std::string, Histogram> histograms;  // label text -> histogram
    std::function<double()> gauge;
  };
  Family& FamilyLocked(const std::string& name, const std::string& type);
  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

// "{a=\"x\",b=\"y\"}" with Prometheus escaping ("" for no labels).
std::string FormatMetricLabels(const MetricLabels& labels);

}  // namespace graphrun

#endif  // GRAPHRUN_UTIL_METRICS_H_
