// Status helpers for graphrun: Abseil 20220623 has no status_macros.h, so
// the project carries its own, prefixed GR_.
#ifndef GRAPHRUN_GRAPH_STATUS_H_
#define GRAPHRUN_GRAPH_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define GR_CONCAT_INNER_(a, b) a##b
#define GR_CONCAT_(a, b) GR_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` is not OK.
#define GR_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::absl::Status gr_status_ = (expr);      \
    if (!gr_status_.ok()) return gr_status_; \
  } while (0)

// `lhs = value of expr`, or returns its error from the enclosing function.
#define GR_ASSIGN_OR_RETURN(lhs, expr) \
  GR_ASSIGN_OR_RETURN_IMPL_(GR_CONCAT_(gr_statusor_, __LINE__), lhs, expr)
#define GR_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

namespace graphrun {

// Returns `s` with `prefix` prepended to its message (code kept).
inline absl::Status AnnotateStatus(const absl::Status& s, absl::string_view prefix) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(prefix, s.message()));
}

// "Code: message", the form every CLI prints on stderr.
std::string StatusToLine(const absl::Status& s);
// `text` on one line: newlines, tabs, other control bytes and bytes that
// are not UTF-8 escaped (\n, \t, \xNN); printable text and UTF-8 kept.
std::string OneLine(absl::string_view text);

}  // namespace graphrun

#endif  // GRAPHRUN_GRAPH_STATUS_H_
