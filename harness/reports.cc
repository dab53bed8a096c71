#include "harness/reports.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "sandbox/common/json_formats.h"
#include "sandbox/plan/report.h"

namespace oarbank {
namespace {

// xs:decimal: never scientific notation.
std::string Seconds(double s) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

std::string Identity(uid_t uid) { return uid == 0 ? "root" : "uid " + std::to_string(uid); }

// The short text shown in a matrix cell.
std::string CellText(const Cell& c) {
  const ProbeRun& r = c.run;
  if (r.exit_code == 70 && r.verdict.empty()) return "refused 70";
  if (r.signal != 0) return r.Summary().substr(7);  // "SIGSYS"
  if (r.verdict == "blocked") return r.err.empty() ? "blocked" : r.err;
  if (r.verdict == "escaped") return c.outcome == Outcome::kPass ? "allowed" : "ESCAPED";
  if (r.verdict.empty()) return "no verdict";
  return r.verdict;
}

struct Counts {
  std::map<Outcome, int> by_outcome;
  int total = 0;
  void Add(const Cell& c) {
    ++by_outcome[c.outcome];
    ++total;
  }
  int failures() const {
    int n = 0;
    for (const auto& [o, k] : by_outcome) n += IsFailure(o) ? k : 0;
    return n;
  }
};

Counts CountAll(const BatteryResult& r) {
  Counts counts;
  for (const auto& c : r.unconfined) counts.Add(c);
  for (const auto& c : r.confined) counts.Add(c);
  return counts;
}

// The checked-in mutation report's score, in a line ("" without one).
std::string MutationLine(const BatteryResult& r) {
  const auto& m = r.mutation;
  if (!m.is_object()) return "";
  std::ostringstream s;
  s << "Mutation analysis (" << m.value("report", "") << ", Linux " << m.value("kernel", "") << ", Landlock ABI "
    << m.value("landlock_abi", 0) << "): " << m.value("points", 0)
    << " enforcement points removed one at a time: " << m.value("killed", 0) << " killed, "
    << m.value("killed_in_pair", 0) << " killed with the layer covering them, " << m.value("changed", 0)
    << " changed an answer, " << m.value("explained", 0) << " explained, " << m.value("survived", 0) << " survived.";
  return s.str();
}

std::string VerdictLine(const BatteryResult& r) {
  const Counts counts = CountAll(r);
  std::ostringstream s;
  s << "oarbank-conform: " << (r.passed ? "PASS" : "FAIL") << ": " << r.probes.size() << " probes x "
    << r.policies.size() << " policies x " << r.uids.size() << " identities"
    << (r.both_entries ? " x 2 entry points (sandbox-exec, run)" : "") << " on Linux " << r.host.kernel_release
    << " (Landlock ABI " << r.abi << (r.host.landlock_capped ? ", capped" : "") << "): ";
  bool first = true;
  for (const auto& [o, k] : counts.by_outcome) {
    s << (first ? "" : ", ") << k << " " << OutcomeName(o);
    first = false;
  }
  s << " in " << static_cast<int>(r.seconds * 10) / 10.0 << " s";
  return s.str();
}

// A confined cell's column: its policy, and with both entry points the
// supervisor's cells a column of their own.
std::string Column(const BatteryResult& r, const Cell& c) {
  return r.both_entries && c.entry == "run" ? c.policy + " (run)" : c.policy;
}

std::vector<std::string> Columns(const BatteryResult& r) {
  std::vector<std::string> columns;
  for (const auto& p : r.policies) {
    columns.push_back(p);
    if (r.both_entries) columns.push_back(p + " (run)");
  }
  return columns;
}

nlohmann::ordered_json CellJson(const Cell& c) {
  nlohmann::ordered_json j = {{"probe", c.probe},
                              {"policy", c.policy},
                              {"entry", c.entry.empty() ? "none" : c.entry},
                              {"uid", c.uid},
                              {"expected", c.expected},
                              {"actual", c.run.Summary()},
                              {"outcome", OutcomeName(c.outcome)},
                              {"why", c.why},
                              {"detail", c.run.detail},
                              {"ms", static_cast<int>(c.run.ms * 10) / 10.0}};
  if (!c.run.stderr_text.empty()) j["stderr"] = c.run.stderr_text;
  return j;
}

}  // namespace

nlohmann::ordered_json BatteryJson(const BatteryResult& r) {
  nlohmann::ordered_json unconfined = nlohmann::ordered_json::array(), confined = nlohmann::ordered_json::array();
  for (const auto& c : r.unconfined) unconfined.push_back(CellJson(c));
  for (const auto& c : r.confined) confined.push_back(CellJson(c));
  nlohmann::ordered_json counts;
  for (const auto& [o, k] : CountAll(r).by_outcome) counts[OutcomeName(o)] = k;
  return {{"format", kBatteryFormat},
          {"verdict", r.passed ? "PASS" : "FAIL"},
          {"summary", VerdictLine(r)},
          {"landlock_abi", r.abi},
          {"capped", r.host.landlock_capped},
          {"seconds", r.seconds},
          {"counts", counts},
          {"probes", r.probes},
          {"policies", r.policies},
          {"both_entries", r.both_entries},
          {"uids", r.uids},
          {"notes", r.notes},
          {"catalogue", CatalogueJson(r)},
          {"mutation", r.mutation},
          {"host", HostReport(r.host)},
          {"unconfined", unconfined},
          {"confined", confined}};
}

std::string BatteryJunit(const BatteryResult& r) {
  // One suite for the unconfined proofs, one per policy and identity.
  std::map<std::string, std::vector<const Cell*>> suites;
  for (const auto& c : r.unconfined) suites["unconfined (root): the probe must escape"].push_back(&c);
  for (const auto& c : r.confined) suites[Column(r, c) + " (" + Identity(c.uid) + ")"].push_back(&c);
  std::ostringstream x;
  const Counts all = CountAll(r);
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuites name=\"oarbank-conform\" tests=\"" << all.total << "\" failures=\"" << all.failures()
    << "\" errors=\"0\" time=\"" << Seconds(r.seconds) << "\">\n";
  for (const auto& [name, cells] : suites) {
    int failures = 0, skipped = 0;
    double time = 0;
    for (const Cell* c : cells) {
      failures += IsFailure(c->outcome);
      skipped += c->outcome == Outcome::kUnsupported || c->outcome == Outcome::kGap;
      time += c->run.ms / 1000;
    }
    x << "  <testsuite name=\"" << Escape(name) << "\" tests=\"" << cells.size() << "\" failures=\"" << failures
      << "\" errors=\"0\" skipped=\"" << skipped << "\" time=\"" << Seconds(time) << "\">\n";
    for (const Cell* c : cells) {
      x << "    <testcase classname=\"oarbank.battery." << Escape(c->policy) << (c->entry == "run" ? ".run." : ".")
        << (c->uid == 0 ? "root" : "nobody") << "\" name=\"" << Escape(c->probe) << "\" time=\""
        << Seconds(c->run.ms / 1000) << "\"";
      const std::string text = "expected " + c->expected + ", got " + c->run.Summary() + ": " + c->why;
      if (IsFailure(c->outcome)) {
        x << ">\n      <failure message=\"" << OutcomeName(c->outcome) << ": " << Escape(text) << "\" type=\""
          << OutcomeName(c->outcome) << "\">" << Escape(text + "\n" + c->run.stderr_text)
          << "</failure>\n    </testcase>\n";
      } else if (c->outcome == Outcome::kUnsupported || c->outcome == Outcome::kGap) {
        x << ">\n      <skipped message=\"" << OutcomeName(c->outcome) << ": " << Escape(c->why)
          << "\"/>\n    </testcase>\n";
      } else {
        x << "/>\n";
      }
    }
    x << "  </testsuite>\n";
  }
  x << "</testsuites>\n";
  return x.str();
}

std::string BatteryMarkdown(const BatteryResult& r) {
  std::map<std::pair<std::string, std::string>, const Cell*> grid;
  for (const auto& c : r.confined) grid[{c.probe, Column(r, c) + "/" + std::to_string(c.uid)}] = &c;
  std::ostringstream m;
  m << "# Escape battery\n\n" << VerdictLine(r) << "\n\n| probe | unconfined |";
  for (const auto& p : Columns(r))
    for (uid_t u : r.uids) m << " " << p << " (" << (u == 0 ? "root" : "nobody") << ") |";
  m << "\n|---|---|";
  for (size_t i = 0; i < Columns(r).size() * r.uids.size(); ++i) m << "---|";
  m << "\n";
  for (size_t i = 0; i < r.probes.size(); ++i) {
    const Cell& u = r.unconfined[i];
    m << "| " << u.probe << " | " << (u.outcome == Outcome::kPass ? "escapes" : OutcomeName(u.outcome)) << " |";
    for (const auto& p : Columns(r))
      for (uid_t uid : r.uids) {
        const Cell* c = grid[{u.probe, p + "/" + std::to_string(uid)}];
        m << " "
          << (c ? CellText(*c) + (IsFailure(c->outcome) ? " **" + std::string(OutcomeName(c->outcome)) + "**" : "")
                : "")
          << " |";
      }
    m << "\n";
  }
  m << "\nCells show what the confined probe got (errno, signal, `refused 70`, `allowed`); bold marks a failure.\n";
  if (r.mutation.is_object()) m << "\n" << MutationLine(r) << "\n";
  if (!r.catalogue.empty()) m << "\n" << CatalogueMarkdown(r);
  return m.str();
}

std::string BatteryHtml(const BatteryResult& r) {
  std::map<std::pair<std::string, std::string>, const Cell*> grid;
  for (const auto& c : r.confined) grid[{c.probe, Column(r, c) + "/" + std::to_string(c.uid)}] = &c;
  auto klass = [](const Cell& c) -> std::string {
    switch (c.outcome) {
      case Outcome::kPass:
        if (c.run.verdict == "escaped") return "allowed";
        if (c.run.exit_code == 70 && c.run.verdict.empty()) return "refused";
        return "blocked";
      case Outcome::kGap: return "gap";
      case Outcome::kUnsupported: return "unsupported";
      case Outcome::kBroken:
      case Outcome::kEscaped:
      case Outcome::kUnexpected: return "fail";
    }
    return "fail";
  };
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>oarbank escape battery</title>\n"
       "<style>body{font:14px system-ui,sans-serif;margin:24px;color:#1b1b1b}"
       "table{border-collapse:collapse}th,td{border:1px solid #bbb;padding:3px 6px;text-align:center}"
       "th.probe,td.probe{text-align:left;font-family:monospace}th.k,td.k{text-align:left}"
       "thead th{background:#eee;position:sticky;top:0}"
       "td.blocked{background:#b7e4b0}td.allowed{background:#a9cdf5}td.refused{background:#d9d9d9}"
       "td.gap,td.unsupported{background:#f7dc8c}td.fail{background:#f08a80;font-weight:bold}"
       ".verdict{font-size:18px;font-weight:bold;padding:8px;display:inline-block}"
       ".PASS{background:#b7e4b0}.FAIL{background:#f08a80}.legend span{padding:2px 8px;margin-right:6px}"
       "</style></head><body>\n";
  h << "<h1>oarbank escape battery</h1>\n<p class=\"verdict " << (r.passed ? "PASS" : "FAIL") << "\" id=\"verdict\">"
    << Escape(VerdictLine(r)) << "</p>\n";
  if (r.mutation.is_object()) h << "<p id=\"mutation\">" << Escape(MutationLine(r)) << "</p>\n";
  h << "<p class=\"legend\"><span class=\"b\" style=\"background:#b7e4b0\">blocked (errno or signal)</span>"
       "<span style=\"background:#a9cdf5\">allowed: a grant, the positive control</span>"
       "<span style=\"background:#d9d9d9\">refused 70: the launcher would not run it on this ABI</span>"
       "<span style=\"background:#f7dc8c\">known gap / route absent on this kernel</span>"
       "<span style=\"background:#f08a80\">failure: escaped, broken or unexpected</span></p>\n";
  if (!r.notes.empty()) {
    h << "<ul>";
    for (const auto& n : r.notes) h << "<li>" << Escape(n) << "</li>";
    h << "</ul>\n";
  }
  h << "<table id=\"matrix\"><thead><tr><th class=\"probe\">probe</th><th>unconfined<br>(root)</th>";
  for (const auto& p : Columns(r))
    for (uid_t u : r.uids) h << "<th>" << Escape(p) << "<br>" << (u == 0 ? "root" : "nobody") << "</th>";
  h << "</tr></thead><tbody>\n";
  for (size_t i = 0; i < r.probes.size(); ++i) {
    const Cell& u = r.unconfined[i];
    h << "<tr><td class=\"probe\">" << Escape(u.probe) << "</td><td class=\""
      << (u.outcome == Outcome::kPass ? "allowed" : klass(u)) << "\" title=\"" << Escape(u.run.detail) << "\">"
      << (u.outcome == Outcome::kPass ? "escapes" : OutcomeName(u.outcome)) << "</td>";
    for (const auto& p : Columns(r))
      for (uid_t uid : r.uids) {
        const Cell* c = grid[{u.probe, p + "/" + std::to_string(uid)}];
        if (!c) {
          h << "<td></td>";
          continue;
        }
        h << "<td class=\"" << klass(*c) << "\" title=\"" << Escape(OutcomeName(c->outcome)) << ": expected "
          << Escape(c->expected) << "; " << Escape(c->why) << "\">" << Escape(CellText(*c)) << "</td>";
      }
    h << "</tr>\n";
  }
  h << "</tbody></table>\n" << CatalogueHtml(r) << "</body></html>\n";
  return h.str();
}

std::string BatterySummary(const BatteryResult& r) {
  std::ostringstream s;
  for (const auto& n : r.notes) s << "note: " << n << "\n";
  // A failure is listed cell by cell; a gap or an absent route once per
  // probe and reason, with the cells it covers counted.
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<int, const Cell*>> known;
  std::vector<std::tuple<std::string, std::string, std::string>> order;
  auto list = [&](const Cell& c) {
    if (IsFailure(c.outcome)) {
      s << "  " << OutcomeName(c.outcome) << "  " << c.probe << " [" << (c.entry.empty() ? c.policy : Column(r, c))
        << ", " << Identity(c.uid)
        << "]: " << (c.expected.empty() ? "" : "expected " + c.expected + ", got " + c.run.Summary() + ": ") << c.why
        << "\n";
    } else if (c.outcome == Outcome::kGap || c.outcome == Outcome::kUnsupported) {
      const auto key = std::make_tuple(std::string(OutcomeName(c.outcome)), c.probe, c.why);
      auto [it, added] = known.try_emplace(key, 0, &c);
      if (added) order.push_back(key);
      ++it->second.first;
    }
  };
  for (const auto& c : r.unconfined) list(c);
  for (const auto& c : r.confined) list(c);
  for (const auto& key : order) {
    const auto& [outcome, probe, why] = key;
    const auto& [n, first] = known[key];
    s << "  " << outcome << "  " << probe << " ["
      << (n == 1 ? (first->entry.empty() ? first->policy : Column(r, *first)) + ", " + Identity(first->uid)
                 : std::to_string(n) + " cells")
      << "]: " << why << "\n";
  }
  s << VerdictLine(r) << "\n";
  return s.str();
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t')
          out += '?';
        else
          out += c;
    }
  }
  return out;
}

std::string PrepareReportDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return dir + ": " + ec.message();
  if (!std::filesystem::is_directory(dir, ec)) return dir + ": not a directory";
  if (access(dir.c_str(), W_OK | X_OK) != 0) return dir + ": " + strerror(errno);
  return "";
}

std::string WriteReportFile(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::trunc);
  if (!file) return path + ": " + strerror(errno);
  file << text;
  file.close();
  if (!file) return path + ": the write did not complete";
  return "";
}

}  // namespace oarbank
