// escapes/catalogue.tsv: the escapes other sandboxes shipped, each with its
// one primary source and what answers it here: battery probes (their
// verdicts on this kernel, per entry point), tests of the host side (the
// proxy's parsing, cage's git protection: user space, the same on every
// kernel), a documented gap, or the reason it cannot apply to a Linux
// launcher (macOS, WSL, a setuid launcher, a seccomp user-notification
// supervisor). harness/test_catalogue.py holds the table to that.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandbox/common/expected.h"

namespace oarbank {

struct BatteryResult;

struct CatalogueEntry {
  int id = 0;
  std::string kind;  // "class" column: tty, seccomp, landlock, proxy, ...
  std::string technique, where, source;
  std::string status;               // probe, test, gap or n/a
  std::vector<std::string> probes;  // covered_by items without "::"
  std::vector<std::string> tests;   // covered_by items FILE::NAME
  std::string reason;
  int line = 0;
};

// The table, checked: 8 tab-separated columns, ids ascending, a status the
// reader knows, a reason wherever the status is not "probe", probes for
// "probe". One line naming the file, the line and what is wrong otherwise.
Expected<std::vector<CatalogueEntry>> LoadCatalogue(const std::string& path);

// Every probe the table names, in the table's order, once.
std::vector<std::string> CatalogueProbes(const std::vector<CatalogueEntry>& entries);

// What the battery showed for an entry under one entry point: "held" (every
// cell of its probes matched the table), "gap" (a documented gap showed),
// "ESCAPED", "FAIL" (another mismatch, or a probe broken unconfined),
// "unsupported" (the route does not exist on this kernel), "refused" (the
// launcher refused every such cell here, exit 70), "not run" (no
// cell of its probes ran under that entry point); for an entry without
// probes its status ("test", "gap", "n/a").
std::string CatalogueVerdict(const CatalogueEntry& entry, const BatteryResult& result, const std::string& entry_point);

// The catalogue table of a battery report: a JSON array (battery.json's
// `catalogue`), a Markdown section and an HTML section ("" without a
// catalogue).
nlohmann::ordered_json CatalogueJson(const BatteryResult& result);
std::string CatalogueMarkdown(const BatteryResult& result);
std::string CatalogueHtml(const BatteryResult& result);
// For the terminal (--catalogue): one line per entry with its two verdicts,
// then the counts and the battery's verdict.
std::string CatalogueText(const BatteryResult& result);

}  // namespace oarbank
