#include "distributed/slurm.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace graphrun {
namespace distributed {
namespace {

// Splits at commas outside brackets.
std::vector<std::string> SplitTopLevel(absl::string_view s) {
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char ch : s) {
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    if (ch == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(ch);
    }
  }
  parts.push_back(cur);
  return parts;
}

absl::Status Bad(absl::string_view what, absl::string_view value) {
  return absl::InvalidArgumentError(absl::StrCat("Slurm: ", what, " '", value, "' is malformed"));
}

}  // namespace

// More nodes or tasks than any Slurm step has: short lists such as
// n[0-99999,0-99999,...] or 60000(x100000) would expand to billions.
constexpr size_t kMaxSlurmEntries = size_t{1} << 20;

absl::Status TooMany(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("Slurm: ", what, " names more than ", kMaxSlurmEntries, " entries"));
}

// Node names go into TF_CONFIG's JSON and into addresses: a host name's
// characters only.
bool IsHostName(absl::string_view name) {
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') {
      return false;
    }
  }
  return !name.empty();
}

absl::StatusOr<std::vector<std::string>> ExpandHostlist(absl::string_view hostlist) {
  std::vector<std::string> out;
  if (hostlist.empty()) return Bad("hostlist", hostlist);
  for (const std::string& part : SplitTopLevel(hostlist)) {
    if (part.empty()) return Bad("hostlist", hostlist);
    const size_t open = part.find('[');
    if (open == std::string::npos) {
      if (part.find(']') != std::string::npos) return Bad("hostlist", hostlist);
      if (!IsHostName(part)) return Bad("hostlist", hostlist);
      if (out.size() >= kMaxSlurmEntries) return TooMany("the hostlist");
      out.push_back(part);
      continue;
    }
    const size_t close = part.find(']', open);
    if (close == std::string::npos) return Bad("hostlist", hostlist);
    const std::string prefix = part.substr(0, open);
    const std::string suffix = part.substr(close + 1);
    if (suffix.find('[') != std::string::npos) return Bad("hostlist", hostlist);
    for (const std::string& range : SplitTopLevel(part.substr(open + 1, close - open - 1))) {
      const size_t dash = range.find('-');
      const std::string lo_text = range.substr(0, dash);
      const std::string hi_text = dash == std::string::npos ? lo_text : range.substr(dash + 1);
      int64_t lo = 0, hi = 0;
      if (lo_text.empty() || !absl::SimpleAtoi(lo_text, &lo) || !absl::SimpleAtoi(hi_text, &hi) ||
          lo < 0 || hi < lo || hi - lo > 100000) {
        return Bad("hostlist", hostlist);
      }
      const size_t width = lo_text.size();
      if (!IsHostName(prefix + "0" + suffix)) return Bad("hostlist", hostlist);
      if (out.size() + static_cast<size_t>(hi - lo + 1) > kMaxSlurmEntries) {
        return TooMany("the hostlist");
      }
      for (int64_t i = lo; i <= hi; ++i) {
        std::string n = absl::StrCat(i);
        if (n.size() < width) n.insert(0, width - n.size(), '0');
        out.push_back(absl::StrCat(prefix, n, suffix));
      }
    }
  }
  return out;
}

absl::StatusOr<std::vector<int>> ExpandTasksPerNode(absl::string_view spec) {
  std::vector<int> out;
  if (spec.empty()) return Bad("tasks per node", spec);
  for (const std::string& part : SplitTopLevel(spec)) {
    const size_t paren = part.find("(x");
    int count = 0, repeat = 1;
    if (!absl::SimpleAtoi(part.substr(0, paren), &count) || count < 0) {
      return Bad("tasks per node", spec);
    }
    if (paren != std::string::npos) {
      if (part.back() != ')' ||
          !absl::SimpleAtoi(part.substr(paren + 2, part.size() - paren - 3), &repeat) ||
          repeat < 1 || repeat > 100000) {
        return Bad("tasks per node", spec);
      }
    }
    if (count > 65535) return Bad("tasks per node", spec);  // one port each
    if (out.size() + static_cast<size_t>(repeat) > kMaxSlurmEntries) {
      return TooMany("tasks per node");
    }
    for (int i = 0; i < repeat; ++i) out.push_back(count);
  }
  return out;
}

bool UnderSlurm(const std::function<const char*(const char*)>& getenv) {
  return getenv("SLURM_PROCID") != nullptr;
}

absl::StatusOr<std::string> TfConfigFromSlurm(const std::function<const char*(const char*)>& getenv,
                                              const SlurmOptions& options) {
  auto var = [&](std::initializer_list<const char*> names) -> absl::StatusOr<std::string> {
    for (const char* n : names) {
      if (const char* v = getenv(n); v != nullptr && *v != '\0') return std::string(v);
    }
    return absl::InvalidArgumentError(
        absl::StrCat("Slurm: ", *names.begin(), " is not set (run the tasks with srun)"));
  };
  auto integer = [&](std::initializer_list<const char*> names) -> absl::StatusOr<int> {
    auto v = var(names);
    if (!v.ok()) return v.status();
    int n = 0;
    if (!absl::SimpleAtoi(*v, &n) || n < 0) return Bad(*names.begin(), *v);
    return n;
  };
  auto rank = integer({"SLURM_PROCID"});
  if (!rank.ok()) return rank.status();
  auto ntasks = integer({"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"});
  if (!ntasks.ok()) return ntasks.status();
  auto nodelist = var({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  if (!nodelist.ok()) return nodelist.status();
  auto per_node = var({"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"});
  if (!per_node.ok()) return per_node.status();
  auto nodes = ExpandHostlist(*nodelist);
  if (!nodes.ok()) return nodes.status();
  auto counts = ExpandTasksPerNode(*per_node);
  if (!counts.ok()) return counts.status();
  if (counts->size() != nodes->size()) {
    return absl::InvalidArgumentError(absl::StrCat("Slurm: ", nodes->size(), " nodes (", *nodelist,
                                                   ") but tasks per node for ", counts->size(),
                                                   " (", *per_node, ")"));
  }
  if (options.port_base < 1 || options.port_base > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--port_base=", options.port_base));
  }
  std::vector<std::string> addresses;
  for (size_t k = 0; k < nodes->size(); ++k) {
    if (addresses.size() + static_cast<size_t>((*counts)[k]) > static_cast<size_t>(*ntasks)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Slurm: ", *ntasks, " tasks but ", *per_node, " per node on ", *nodelist));
    }
    for (int i = 0; i < (*counts)[k]; ++i) {
      if (options.port_base + i > 65535) {
        return absl::InvalidArgumentError("Slurm: too many tasks on one node for --port_base");
      }
      addresses.push_back(absl::StrCat("\"", (*nodes)[k], ":", options.port_base + i, "\""));
    }
  }
  if (static_cast<int>(addresses.size()) != *ntasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("Slurm: ", *ntasks, " tasks but ", *per_node, " per node on ", *nodelist));
  }
  if (*rank >= *ntasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("Slurm: SLURM_PROCID ", *rank, " is not below the ", *ntasks, " tasks"));
  }
  if (options.num_ps < 0 || options.num_ps >= *ntasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("Slurm: ", *ntasks, " tasks leave no worker after --ps=", options.num_ps));
  }
  std::vector<std::string> ps(addresses.begin(), addresses.begin() + options.num_ps);
  std::vector<std::string> workers(addresses.begin() + options.num_ps, addresses.end());
  const bool is_ps = *rank < options.num_ps;
  std::string cluster = absl::StrCat("\"worker\": [", absl::StrJoin(workers, ", "), "]");
  if (!ps.empty()) cluster = absl::StrCat("\"ps\": [", absl::StrJoin(ps, ", "), "], ", cluster);
  return absl::StrCat("{\"cluster\": {", cluster, "}, \"task\": {\"type\": \"",
                      is_ps ? "ps" : "worker",
                      "\", \"index\": ", is_ps ? *rank : *rank - options.num_ps, "}}");
}

}  // namespace distributed
}  // namespace graphrun
