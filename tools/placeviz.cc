#include "tools/placeviz.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "graph/function_lowering.h"
#include "graph/graph.h"
#include "graph/proto/config.pb.h"
#include "graph/status.h"
#include "tools/file_util.h"
#include "tools/flags.h"
#include "tools/model_graph.h"
#include "tools/placement_flags.h"
#include "util/temp_dir.h"

namespace graphrun {
namespace tools {
namespace {

using placement::EdgeReport;
using placement::PlacementReport;
using placement::TaskPairReport;
using placement::TaskReport;
using placement::VariableReport;

std::string ShapeText(const PartialShape& s) {
  if (!s.known_rank()) return "?";
  std::vector<std::string> dims;
  for (int64_t d : s.dims()) dims.push_back(d < 0 ? "?" : absl::StrCat(d));
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

std::string BytesText(int64_t b) { return b < 0 ? "?" : HumanBytes(b); }

std::string EdgesHeading(const PlacementReport& r) {
  if (r.measured) return "cross-task edges (bytes measured in the step)";
  return absl::StrCat("cross-task edges (bytes per step, unknown dims = batch size ", r.batch_size,
                      ")");
}

int64_t TotalPsBytes(const PlacementReport& r) {
  int64_t total = 0;
  for (const TaskReport& t : r.tasks) total += t.is_ps ? t.bytes : 0;
  return total;
}

std::string Html(absl::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A DOT string; a newline becomes a centered line break.
std::string DotQuote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string Title(const PlacementReport& r) {
  int ps = 0;
  for (const TaskReport& t : r.tasks) ps += t.is_ps;
  if (r.measured) {
    return absl::StrCat(r.measured_steps > 1 ? absl::StrCat("measured traffic per step (mean of ",
                                                            r.measured_steps, " steps)")
                                             : std::string("measured traffic of one step"),
                        ", ", r.tasks.size(), " tasks (", ps, " PS)");
  }
  return absl::StrCat("strategy ", r.strategy.empty() ? "(as given)" : r.strategy, ", ", ps,
                      " PS tasks, batch size ", r.batch_size);
}

}  // namespace

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrCat(bytes, " B") : absl::StrFormat("%.1f %s", v, units[u]);
}

std::string ReportToText(const PlacementReport& r) {
  const int64_t total = TotalPsBytes(r);
  std::string out = absl::StrCat("placement: ", Title(r), "\n\n");
  absl::StrAppend(&out, absl::StrFormat("%-24s %12s %7s %5s %7s %12s %12s\n", "task", "bytes",
                                        "share", "vars", "nodes", "send/step", "recv/step"));
  for (const TaskReport& t : r.tasks) {
    const std::string share =
        t.is_ps && total > 0 ? absl::StrFormat("%.1f%%", 100.0 * t.bytes / total) : "-";
    absl::StrAppend(&out, absl::StrFormat("%-24s %12s %7s %5d %7d %12s %12s\n", t.task,
                                          HumanBytes(t.bytes), share, t.variables.size(),
                                          t.nodes.size(), HumanBytes(t.send_bytes_per_step),
                                          HumanBytes(t.recv_bytes_per_step)));
  }
  absl::StrAppend(
      &out, absl::StrFormat("\nimbalance (max/mean bytes over PS tasks): %.3f\n", r.imbalance));
  absl::StrAppend(&out, r.measured ? "\nvariables (read: value out of its task per step; "
                                     "update: bytes applied to it per step):\n"
                                   : "\nvariables:\n");
  for (const TaskReport& t : r.tasks) {
    for (const VariableReport& v : t.variables) {
      absl::StrAppend(
          &out, absl::StrFormat("  %-22s %-36s %-14s %-10s %12s", t.task, v.name,
                                ShapeText(v.shape), DataTypeEnumName(v.dtype), BytesText(v.bytes)));
      if (r.measured) {
        absl::StrAppend(
            &out, absl::StrFormat("  read %10s  update %10s", BytesText(v.read_bytes_per_step),
                                  BytesText(v.update_bytes_per_step)));
      }
      out += "\n";
    }
  }
  absl::StrAppend(&out, "\n", EdgesHeading(r), ":\n");
  if (r.edges.empty()) out += "  (none)\n";
  for (const EdgeReport& e : r.edges) {
    absl::StrAppend(&out, absl::StrFormat("  %-22s -> %-22s %-40s %12s", e.src_task, e.dst_task,
                                          e.tensor, BytesText(e.bytes_per_step)));
    if (!e.variable.empty()) absl::StrAppend(&out, "  (", e.variable, ")");
    out += "\n";
  }
  if (!r.pairs.empty()) {
    absl::StrAppend(&out, "\ntask pairs (bytes per step):\n");
    for (const TaskPairReport& p : r.pairs) {
      absl::StrAppend(&out, absl::StrFormat("  %-22s -> %-22s %12s  %d edges\n", p.src_task,
                                            p.dst_task, BytesText(p.bytes_per_step), p.num_edges));
    }
  }
  return out;
}

std::string CompareToText(const std::vector<PlacementReport>& reports) {
  std::string out = absl::StrFormat("%-24s", "PS task");
  for (const PlacementReport& r : reports)
    absl::StrAppend(&out, absl::StrFormat(" %14s", r.strategy));
  out += "\n";
  std::vector<std::string> tasks;
  for (const PlacementReport& r : reports) {
    for (const TaskReport& t : r.tasks) {
      if (t.is_ps && std::find(tasks.begin(), tasks.end(), t.task) == tasks.end()) {
        tasks.push_back(t.task);
      }
    }
  }
  for (const std::string& task : tasks) {
    absl::StrAppend(&out, absl::StrFormat("%-24s", task));
    for (const PlacementReport& r : reports) {
      std::string cell = "-";
      for (const TaskReport& t : r.tasks) {
        if (t.task == task) cell = HumanBytes(t.bytes);
      }
      absl::StrAppend(&out, absl::StrFormat(" %14s", cell));
    }
    out += "\n";
  }
  auto row = [&](const char* name, auto value) {
    absl::StrAppend(&out, absl::StrFormat("%-24s", name));
    for (const PlacementReport& r : reports)
      absl::StrAppend(&out, absl::StrFormat(" %14s", value(r)));
    out += "\n";
  };
  row("imbalance (max/mean)",
      [](const PlacementReport& r) { return absl::StrFormat("%.3f", r.imbalance); });
  row("variables", [](const PlacementReport& r) {
    size_t n = 0;
    for (const TaskReport& t : r.tasks) n += t.variables.size();
    return absl::StrCat(n);
  });
  row("cross-task bytes/step", [](const PlacementReport& r) {
    int64_t n = 0;
    for (const EdgeReport& e : r.edges) n += std::max<int64_t>(e.bytes_per_step, 0);
    return HumanBytes(n);
  });
  return out;
}

std::string ReportToDot(const PlacementReport& r) {
  int64_t max_var = 1;
  for (const TaskReport& t : r.tasks) {
    for (const VariableReport& v : t.variables) max_var = std::max(max_var, v.bytes);
  }
  std::string out =
      absl::StrCat("digraph placement {\n  graph [rankdir=LR, fontname=\"Helvetica\", label=",
                   DotQuote(Title(r)),
                   ", labelloc=t];\n  node [fontname=\"Helvetica\", fontsize=10];\n"
                   "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#c0392b\"];\n");
  std::map<std::string, std::string> var_id;  // variable name -> dot id
  for (size_t i = 0; i < r.tasks.size(); ++i) {
    const TaskReport& t = r.tasks[i];
    absl::StrAppend(
        &out, "  subgraph cluster_", i, " {\n    label=",
        DotQuote(absl::StrCat(t.task, "\n", HumanBytes(t.bytes), ", ", t.nodes.size(), " nodes")),
        ";\n    style=filled; fillcolor=", t.is_ps ? "\"#eaf2fb\"" : "\"#f4f6f4\"", ";\n    t", i,
        "_ops [shape=ellipse, label=",
        DotQuote(absl::StrCat(t.nodes.size() - t.variables.size(), " ops")), "];\n");
    for (size_t j = 0; j < t.variables.size(); ++j) {
      const VariableReport& v = t.variables[j];
      const double scale = std::sqrt(static_cast<double>(std::max<int64_t>(v.bytes, 0)) / max_var);
      const std::string id = absl::StrCat("t", i, "_v", j);
      var_id[v.name] = id;
      absl::StrAppend(
          &out, "    ", id, " [shape=box, style=filled, fillcolor=\"#f9d77e\", width=",
          absl::StrFormat("%.2f", 0.6 + 2.4 * scale),
          ", height=", absl::StrFormat("%.2f", 0.3 + 1.2 * scale), ", label=",
          DotQuote(absl::StrCat(
              v.name, "\n", ShapeText(v.shape), " ", BytesText(v.bytes),
              v.read_bytes_per_step >= 0 || v.update_bytes_per_step >= 0
                  ? absl::StrCat("\nread ", BytesText(v.read_bytes_per_step), ", update ",
                                 BytesText(v.update_bytes_per_step), " /step")
                  : "")),
          "];\n");
    }
    out += "  }\n";
  }
  std::map<std::string, size_t> task_index;
  for (size_t i = 0; i < r.tasks.size(); ++i) task_index[r.tasks[i].task] = i;
  for (const EdgeReport& e : r.edges) {
    auto s = task_index.find(e.src_task), d = task_index.find(e.dst_task);
    if (s == task_index.end() || d == task_index.end()) continue;
    const std::string node = e.tensor.substr(0, e.tensor.rfind(':'));
    auto v = var_id.find(node);
    const std::string src = v != var_id.end() ? v->second : absl::StrCat("t", s->second, "_ops");
    absl::StrAppend(&out, "  ", src, " -> t", d->second, "_ops [label=",
                    DotQuote(absl::StrCat(e.tensor, "\n", BytesText(e.bytes_per_step), "/step")),
                    "];\n");
  }
  // One bold edge per task pair, between the tasks' op nodes: the pair's
  // total per step and its edge count, drawn thicker the more it carries.
  int64_t max_pair = 1;
  for (const TaskPairReport& p : r.pairs) max_pair = std::max(max_pair, p.bytes_per_step);
  for (const TaskPairReport& p : r.pairs) {
    auto s = task_index.find(p.src_task), d = task_index.find(p.dst_task);
    if (s == task_index.end() || d == task_index.end()) continue;
    const double scale =
        std::sqrt(static_cast<double>(std::max<int64_t>(p.bytes_per_step, 0)) / max_pair);
    absl::StrAppend(&out, "  t", s->second, "_ops -> t", d->second,
                    "_ops [style=bold, color=\"#2c3e50\", penwidth=",
                    absl::StrFormat("%.1f", 1.5 + 4.5 * scale), ", label=",
                    DotQuote(absl::StrCat("total ", BytesText(p.bytes_per_step), "/step\n",
                                          p.num_edges, p.num_edges == 1 ? " edge" : " edges")),
                    "];\n");
  }
  out += "}\n";
  return out;
}

absl::StatusOr<std::string> DotToSvg(const std::string& dot_text) {
  GR_ASSIGN_OR_RETURN(const std::string path, MakeTempFile("placeviz_"));
  absl::Status written = WriteStringToFile(path, dot_text);
  if (!written.ok()) {
    unlink(path.c_str());
    return written;
  }
  // Quoted for the shell ($TMPDIR may hold any character but NUL).
  const std::string quoted = absl::StrCat("'", absl::StrReplaceAll(path, {{"'", "'\\''"}}), "'");
  FILE* pipe = popen(absl::StrCat("dot -Tsvg ", quoted, " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    unlink(path.c_str());
    return absl::InternalError("cannot run dot");
  }
  std::string svg;
  char buf[8192];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) svg.append(buf, n);
  const int status = pclose(pipe);
  unlink(path.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return absl::UnavailableError("Graphviz 'dot' is not installed (apt-get install graphviz)");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("dot -Tsvg failed: ", svg.substr(0, 500)));
  }
  return svg;
}

std::string ReportToHtml(const PlacementReport& r, const std::string& svg) {
  const int64_t total = TotalPsBytes(r);
  std::string out = absl::StrCat(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>placeviz: ", Html(r.strategy),
      "</title>\n<style>body{font-family:Helvetica,Arial,sans-serif;margin:24px;color:#222}"
      "table{border-collapse:collapse;margin:8px 0 20px}td,th{border:1px solid #ccc;padding:3px "
      "8px;"
      "font-size:13px}th{background:#eef}td.n{text-align:right}.bar{background:#4a90d9;height:10px}"
      "h1{font-size:20px}h2{font-size:16px;margin-top:24px}</style></head><body>\n<h1>Placement: ",
      Html(Title(r)), "</h1>\n<p>imbalance (max/mean bytes over PS tasks): <b>",
      absl::StrFormat("%.3f", r.imbalance),
      "</b></p>\n<h2>Tasks</h2>\n<table><tr><th>task</th>"
      "<th>bytes</th><th>share</th><th></th><th>variables</th><th>nodes</th><th>send/step</th>"
      "<th>recv/step</th></tr>\n");
  for (const TaskReport& t : r.tasks) {
    const double share = t.is_ps && total > 0 ? 100.0 * t.bytes / total : 0;
    absl::StrAppend(&out, "<tr><td>", Html(t.task), "</td><td class=n>", HumanBytes(t.bytes),
                    "</td><td class=n>", t.is_ps ? absl::StrFormat("%.1f%%", share) : "-",
                    "</td><td style=\"width:160px\"><div class=bar style=\"width:",
                    absl::StrFormat("%.0f", 1.6 * share), "px\"></div></td><td class=n>",
                    t.variables.size(), "</td><td class=n>", t.nodes.size(), "</td><td class=n>",
                    HumanBytes(t.send_bytes_per_step), "</td><td class=n>",
                    HumanBytes(t.recv_bytes_per_step), "</td></tr>\n");
  }
  out += "</table>\n<h2>Picture</h2>\n";
  if (!svg.empty()) {
    const size_t start = svg.find("<svg");
    absl::StrAppend(&out, "<div>", start == std::string::npos ? svg : svg.substr(start),
                    "</div>\n");
  } else {
    absl::StrAppend(&out, "<pre>", Html(ReportToDot(r)), "</pre>\n");
  }
  out +=
      "<h2>Variables</h2>\n<table><tr><th>task</th><th>name</th><th>shape</th><th>dtype</th>"
      "<th>bytes</th>";
  if (r.measured) out += "<th>read/step</th><th>update/step</th>";
  out += "</tr>\n";
  for (const TaskReport& t : r.tasks) {
    for (const VariableReport& v : t.variables) {
      absl::StrAppend(&out, "<tr><td>", Html(t.task), "</td><td>", Html(v.name), "</td><td>",
                      ShapeText(v.shape), "</td><td>", DataTypeEnumName(v.dtype),
                      "</td><td class=n>", BytesText(v.bytes), "</td>");
      if (r.measured) {
        absl::StrAppend(&out, "<td class=n>", BytesText(v.read_bytes_per_step), "</td><td class=n>",
                        BytesText(v.update_bytes_per_step), "</td>");
      }
      out += "</tr>\n";
    }
  }
  if (!r.pairs.empty()) {
    out +=
        "</table>\n<h2>Task pairs</h2>\n<table><tr><th>from</th><th>to</th><th>bytes/step</th>"
        "<th>edges</th></tr>\n";
    for (const TaskPairReport& p : r.pairs) {
      absl::StrAppend(&out, "<tr><td>", Html(p.src_task), "</td><td>", Html(p.dst_task),
                      "</td><td class=n>", BytesText(p.bytes_per_step), "</td><td class=n>",
                      p.num_edges, "</td></tr>\n");
    }
  }
  std::string heading = EdgesHeading(r);
  heading[0] = 'C';
  absl::StrAppend(&out, "</table>\n<h2>", Html(heading),
                  "</h2>\n<table><tr><th>from</th><th>to</th><th>tensor</th>"
                  "<th>bytes/step</th>",
                  r.measured ? "<th>variable</th>" : "", "</tr>\n");
  for (const EdgeReport& e : r.edges) {
    absl::StrAppend(&out, "<tr><td>", Html(e.src_task), "</td><td>", Html(e.dst_task), "</td><td>",
                    Html(e.tensor), "</td><td class=n>", BytesText(e.bytes_per_step), "</td>",
                    r.measured ? absl::StrCat("<td>", Html(e.variable), "</td>") : "", "</tr>\n");
  }
  out += "</table>\n</body></html>\n";
  return out;
}

namespace {

const FlagSet& PlacevizFlags() {
  static const FlagSet* const kFlags = [] {
    auto* f = new FlagSet();
    AddPlacementFlags(*f)
        .String("format", "text|json|dot|svg|html", "output format (default text)")
        .String("out", "FILE", "write to FILE instead of stdout")
        .Repeated("fetch", "NAME[:i]", "count only edges one step over these nodes needs")
        .String("compare", "S1,S2,...", "compare strategies side by side (text)")
        .String("run_metadata", "FILE(.pb|.pbtxt)",
                "measured traffic of a real step (graphrun run --run_metadata); no GRAPH needed");
    return f;
  }();
  return *kFlags;
}

std::string Usage() {
  return absl::StrCat(
      "usage: placeviz GRAPH(.pb|.pbtxt) --ps_tasks=N|--cluster=JSON [--strategy=NAME]\n"
      "                [--format=text|json|dot|svg|html] [--out=FILE] [--compare=S1,S2]\n"
      "       placeviz --run_metadata=FILE(.pb|.pbtxt) [--format=...] [--out=FILE]\n\n"
      "Shows which variables each parameter-server task holds and what crosses tasks.\n\n"
      "flags:\n",
      PlacevizFlags().Usage());
}

absl::StatusOr<std::string> Render(const PlacementReport& r, const std::string& format) {
  if (format == "json") return placement::ReportToJson(r);
  if (format == "dot") return ReportToDot(r);
  if (format == "svg") return DotToSvg(ReportToDot(r));
  if (format == "html") {
    auto svg = DotToSvg(ReportToDot(r));
    return ReportToHtml(r, svg.ok() ? *svg : "");
  }
  return ReportToText(r);
}

absl::Status Emit(const ParsedFlags& flags, const std::string& text, std::ostream& out) {
  if (flags.Has("out")) return WriteStringToFile(flags.GetString("out"), text);
  out << text;
  out.flush();
  return absl::OkStatus();
}

absl::Status RunOnGraph(const ParsedFlags& flags, const PlacementFlags& placement,
                        const tensorflow::GraphDef& model, std::ostream& out);

absl::Status Run(const ParsedFlags& flags, const PlacementFlags& placement, std::ostream& out) {
  absl::flat_hash_map<std::string, std::string> origin;
  GR_ASSIGN_OR_RETURN(const tensorflow::GraphDef model,
                      ReadModelGraph(flags.positional()[0], std::cerr, &origin));
  // Placement errors name an inlined node's function.
  return AnnotateLoweringError(RunOnGraph(flags, placement, model, out), origin);
}

absl::Status RunOnGraph(const ParsedFlags& flags, const PlacementFlags& placement,
                        const tensorflow::GraphDef& model, std::ostream& out) {
  const std::string format = flags.GetString("format", "text");
  std::string text;
  if (flags.Has("compare")) {
    std::vector<PlacementReport> reports;
    for (absl::string_view s : absl::StrSplit(flags.GetString("compare"), ',', absl::SkipEmpty())) {
      PlacementFlags p = placement;
      p.strategy = std::string(s);
      tensorflow::GraphDef def = model;
      GR_ASSIGN_OR_RETURN(PlacementReport r, ApplyPlacementFlags(&def, p, flags.GetAll("fetch")));
      reports.push_back(std::move(r));
    }
    if (format == "json") {
      text = "[";
      for (size_t i = 0; i < reports.size(); ++i) {
        absl::StrAppend(&text, i ? ",\n" : "", placement::ReportToJson(reports[i]));
      }
      text += "]\n";
    } else {
      text = CompareToText(reports);
    }
  } else {
    tensorflow::GraphDef def = model;
    GR_ASSIGN_OR_RETURN(PlacementReport r,
                        ApplyPlacementFlags(&def, placement, flags.GetAll("fetch")));
    GR_ASSIGN_OR_RETURN(text, Render(r, format));
  }
  return Emit(flags, text, out);
}

absl::Status RunMeasured(const ParsedFlags& flags, std::ostream& out) {
  const std::string path = flags.GetString("run_metadata");
  GR_ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(path));
  tensorflow::RunMetadata metadata;
  const bool text_format = absl::EndsWith(path, ".pbtxt");
  const absl::Status parsed =
      text_format
          ? ParseTextProto(bytes, &metadata)
          : (metadata.ParseFromString(bytes) ? absl::OkStatus()
                                             : absl::InvalidArgumentError("not binary protobuf"));
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a RunMetadata (read as ",
        text_format ? "text, for its .pbtxt suffix" : "binary, having no .pbtxt suffix", ": ",
        parsed.message(), ")"));
  }
  GR_ASSIGN_OR_RETURN(PlacementReport r, placement::MeasuredTrafficReport(metadata));
  GR_ASSIGN_OR_RETURN(std::string text, Render(r, flags.GetString("format", "text")));
  return Emit(flags, text, out);
}

}  // namespace

int PlacevizMain(absl::Span<const std::string> args, std::ostream& out, std::ostream& err) {
  for (const std::string& a : args) {
    if (a == "--") break;
    if (a == "--help" || a == "-h") {
      out << Usage();
      return kExitOk;
    }
  }
  auto usage_error = [&](const absl::Status& s) {
    err << StatusToLine(s) << "\n";
    return kExitUsage;
  };
  auto flags = PlacevizFlags().Parse(args);
  if (!flags.ok()) return usage_error(flags.status());
  const std::string format = flags->GetString("format", "text");
  if (format != "text" && format != "json" && format != "dot" && format != "svg" &&
      format != "html") {
    return usage_error(absl::InvalidArgumentError(
        absl::StrCat("--format: expected text, json, dot, svg or html, got '", format, "'")));
  }
  if (flags->Has("run_metadata")) {
    if (!flags->positional().empty() || flags->Has("compare")) {
      return usage_error(absl::InvalidArgumentError(
          "placeviz: --run_metadata takes no GRAPH file and no --compare"));
    }
    absl::Status s = RunMeasured(*flags, out);
    if (!s.ok()) {
      err << StatusToLine(s) << "\n";
      return kExitFailure;
    }
    return kExitOk;
  }
  if (flags->positional().size() != 1) {
    return usage_error(absl::InvalidArgumentError("placeviz: expected one GRAPH file"));
  }
  auto placement = ParsePlacementFlags(*flags);
  if (!placement.ok()) return usage_error(placement.status());
  if (!placement->enabled()) {
    return usage_error(absl::InvalidArgumentError("placeviz: give --ps_tasks=N or --cluster=JSON"));
  }
  if (flags->Has("compare") &&
      absl::StrReplaceAll(flags->GetString("compare"), {{",", ""}}).empty()) {
    return usage_error(absl::InvalidArgumentError(absl::StrCat(
        "--compare: expected strategies S1,S2,..., got '", flags->GetString("compare"), "'")));
  }
  if (flags->Has("compare") && flags->Has("format") && flags->GetString("format") != "text") {
    // The comparison is a text table only: another format was ignored.
    return usage_error(absl::InvalidArgumentError(
        absl::StrCat("--compare prints a text table; --format=", flags->GetString("format"),
                     " is not available with it")));
  }
  absl::Status s = Run(*flags, *placement, out);
  if (!s.ok()) {
    err << StatusToLine(s) << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace tools
}  // namespace graphrun
