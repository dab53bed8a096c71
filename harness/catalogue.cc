#include "harness/catalogue.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "harness/battery.h"
#include "harness/reports.h"

namespace oarbank {
namespace {

constexpr const char* kHeader = "id\tclass\ttechnique\twhere\tsource\tstatus\tcovered_by\treason";

// Every field, the empty last one too (a probe row without a reason).
std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t from = 0;
  for (size_t at; (at = s.find(sep, from)) != std::string::npos; from = at + 1)
    out.push_back(s.substr(from, at - from));
  out.push_back(s.substr(from));
  return out;
}

// One row, or the line saying what is wrong with it.
Expected<CatalogueEntry> ParseRow(const std::vector<std::string>& f, int previous_id, const std::string& where) {
  if (f.size() != 8) return Error{where, "expected 8 tab-separated fields, got " + std::to_string(f.size())};
  CatalogueEntry e;
  try {
    size_t used = 0;
    e.id = std::stoi(f[0], &used);
    if (used != f[0].size()) throw std::invalid_argument(f[0]);
  } catch (...) {
    return Error{where, "id: expected an integer"};
  }
  if (e.id <= previous_id) return Error{where, "id " + f[0] + ": ids ascend, each once"};
  e.kind = f[1];
  e.technique = f[2];
  e.where = f[3];
  e.source = f[4];
  e.status = f[5];
  e.reason = f[7];
  if (e.technique.empty() || e.source.empty()) return Error{where, "technique and source are required"};
  if (e.status != "probe" && e.status != "test" && e.status != "gap" && e.status != "n/a")
    return Error{where, "status: one of probe, test, gap, n/a"};
  if (f[6] != "-")
    for (const std::string& item : Split(f[6], ','))
      (item.find("::") == std::string::npos ? e.probes : e.tests).push_back(item);
  if (e.status == "probe" && e.probes.empty()) return Error{where, "status probe names at least one probe"};
  if (e.status == "test" && e.tests.empty()) return Error{where, "status test names at least one test (FILE::NAME)"};
  if (e.status == "n/a" && f[6] != "-") return Error{where, "status n/a is covered by nothing: -"};
  if (e.status != "probe" && e.reason.empty()) return Error{where, "status " + e.status + " needs its reason"};
  return e;
}

}  // namespace

Expected<std::vector<CatalogueEntry>> LoadCatalogue(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{path, "cannot read the catalogue of published escapes"};
  std::vector<CatalogueEntry> entries;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const std::string where = path + ":" + std::to_string(number);
    if (number == 1) {
      if (line != kHeader) return Error{where, std::string("expected the header: ") + kHeader};
      continue;
    }
    if (line.empty()) continue;
    auto entry = ParseRow(Split(line, '\t'), entries.empty() ? 0 : entries.back().id, where);
    if (!entry.ok()) return entry.error();
    CatalogueEntry e = entry.value();
    e.line = number;
    entries.push_back(std::move(e));
  }
  if (entries.empty()) return Error{path, "no entries"};
  return entries;
}

std::vector<std::string> CatalogueProbes(const std::vector<CatalogueEntry>& entries) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& e : entries)
    for (const auto& p : e.probes)
      if (seen.insert(p).second) out.push_back(p);
  return out;
}

std::string CatalogueVerdict(const CatalogueEntry& entry, const BatteryResult& result, const std::string& entry_point) {
  if (entry.probes.empty()) return entry.status;
  const std::set<std::string> probes(entry.probes.begin(), entry.probes.end());
  bool ran = false, escaped = false, failed = false, gap = false, held = false, refused = false;
  for (const auto& c : result.unconfined)
    if (probes.count(c.probe)) failed |= c.outcome == Outcome::kBroken;
  for (const auto& c : result.confined) {
    // A cage cell is a supervised job: it answers for run.
    if (!probes.count(c.probe) || (c.entry == "cage" ? "run" : c.entry) != entry_point) continue;
    ran = true;
    escaped |= c.outcome == Outcome::kEscaped;
    failed |= c.outcome == Outcome::kUnexpected || c.outcome == Outcome::kBroken;
    gap |= c.outcome == Outcome::kGap;
    // A cell held when the probe ran and was stopped as the table says; one
    // the launcher refused before the probe started holds nothing.
    const bool started = !c.run.verdict.empty() || c.run.signal != 0;
    held |= c.outcome == Outcome::kPass && started;
    refused |= c.outcome == Outcome::kPass && !started;
  }
  if (escaped) return "ESCAPED";
  if (failed) return "FAIL";
  if (!ran) return "not run";
  if (gap) return "gap";
  if (held) return "held";
  return refused ? "refused" : "unsupported";
}

}  // namespace oarbank

namespace oarbank {
namespace {

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

// What answers the entry, for a reader: its probes, else its tests, else
// the reason.
std::string Answer(const CatalogueEntry& e) {
  if (!e.probes.empty()) return Joined(e.probes);
  if (!e.tests.empty()) return Joined(e.tests);
  return e.reason;
}

}  // namespace

nlohmann::ordered_json CatalogueJson(const BatteryResult& r) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& e : r.catalogue)
    out.push_back({{"id", e.id},
                   {"class", e.kind},
                   {"technique", e.technique},
                   {"where", e.where},
                   {"source", e.source},
                   {"status", e.status},
                   {"probes", e.probes},
                   {"tests", e.tests},
                   {"reason", e.reason},
                   {"sandbox_exec", CatalogueVerdict(e, r, "sandbox-exec")},
                   {"run", CatalogueVerdict(e, r, "run")}});
  return out;
}

std::string CatalogueMarkdown(const BatteryResult& r) {
  if (r.catalogue.empty()) return "";
  std::ostringstream m;
  m << "## Published escapes\n\n"
       "| # | technique | where | source | probes, tests or reason | sandbox-exec | run |\n"
       "|---|---|---|---|---|---|---|\n";
  auto cell = [](std::string s) {
    for (size_t at = 0; (at = s.find('|', at)) != std::string::npos; at += 2) s.replace(at, 1, "\\|");
    return s;
  };
  for (const auto& e : r.catalogue)
    m << "| " << e.id << " | " << cell(e.technique) << " | " << cell(e.where) << " | " << e.source << " | "
      << cell(Answer(e)) << " | " << CatalogueVerdict(e, r, "sandbox-exec") << " | " << CatalogueVerdict(e, r, "run")
      << " |\n";
  m << "\n`held`: every cell of its probes matched the table; `gap`: a documented gap; `test`: the host-side "
       "tests named answer it (user space, the same on every kernel); `n/a`: the reason says why it cannot apply; "
       "`refused`: the launcher refused the policies here (exit 70); `not run`: no cell ran under that entry "
       "point.\n";
  return m.str();
}

std::string CatalogueText(const BatteryResult& r) {
  std::ostringstream t;
  std::map<std::string, int> counts;
  t << "  #  sandbox-exec  run           technique (where)\n";
  for (const auto& e : r.catalogue) {
    const std::string se = CatalogueVerdict(e, r, "sandbox-exec"), run = CatalogueVerdict(e, r, "run");
    char head[64];
    snprintf(head, sizeof head, "%3d  %-12s  %-12s  ", e.id, se.c_str(), run.c_str());
    t << head << e.technique << " (" << e.where << ")\n";
    ++counts[se == run ? se : se + "/" + run];
  }
  t << "catalogue: " << (r.passed ? "PASS" : "FAIL") << ": " << r.catalogue.size() << " published escapes on Linux "
    << r.host.kernel_release << " (Landlock ABI " << r.abi << "):";
  bool first = true;
  for (const auto& [verdict, n] : counts) {
    t << (first ? " " : ", ") << n << " " << verdict;
    first = false;
  }
  t << "\n";
  return t.str();
}

std::string CatalogueHtml(const BatteryResult& r) {
  if (r.catalogue.empty()) return "";
  auto klass = [](const std::string& v) -> std::string {
    if (v == "held") return "blocked";
    if (v == "ESCAPED" || v == "FAIL") return "fail";
    if (v == "gap" || v == "unsupported") return "gap";
    return "refused";
  };
  std::ostringstream h;
  h << "<h2 id=\"catalogue\">Published escapes</h2>\n<table id=\"catalogue-table\"><thead><tr><th>#</th>"
       "<th class=\"k\">technique</th><th>where</th><th class=\"k\">probes, tests or reason</th>"
       "<th>sandbox-exec</th><th>run</th></tr></thead><tbody>\n";
  for (const auto& e : r.catalogue) {
    const std::string se = CatalogueVerdict(e, r, "sandbox-exec"), run = CatalogueVerdict(e, r, "run");
    h << "<tr><td>" << e.id << "</td><td class=\"k\">" << Escape(e.technique) << "</td><td><a href=\""
      << Escape(e.source) << "\">" << Escape(e.where) << "</a></td><td class=\"k\" title=\"" << Escape(e.reason)
      << "\">" << Escape(Answer(e)) << "</td><td class=\"" << klass(se) << "\">" << Escape(se) << "</td><td class=\""
      << klass(run) << "\">" << Escape(run) << "</td></tr>\n";
  }
  h << "</tbody></table>\n";
  return h.str();
}

}  // namespace oarbank
