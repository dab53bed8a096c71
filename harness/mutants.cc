#include "harness/mutants.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "harness/probe_spawn.h"
#include "harness/reports.h"
#include "harness/world.h"
#include "sandbox/common/json_formats.h"

namespace oarbank {
namespace {

namespace fs = std::filesystem;
constexpr int kListTimeoutMs = 30000;

// The battery policies a run covers: every fixture, or those asked for.
std::vector<std::string> PolicyNames(const BatteryOptions& o) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(o.policy_dir, ec))
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  if (!o.only_policies.empty())
    std::erase_if(names, [&](const std::string& n) {
      return std::find(o.only_policies.begin(), o.only_policies.end(), n) == o.only_policies.end();
    });
  return names;
}

// Every point of every policy, from the test-only agent, merged by id.
Expected<std::vector<MutantResult>> ListPoints(const BatteryOptions& o) {
  auto world = MakeWorld(o.probe_dir, o.uids, false);
  if (!world.ok()) return world.error();
  std::vector<MutantResult> points;
  std::map<std::string, size_t> index;
  for (const auto& name : PolicyNames(o)) {
    auto path = MaterializePolicy(*world.value(), o.policy_dir + "/" + name + ".json", name);
    if (!path.ok()) return path.error();
    const ProbeRun r =
        SpawnProbe({o.agent, "mutation-points", path.value()}, {"PATH=/usr/bin:/bin"}, 0, kListTimeoutMs);
    const auto list = nlohmann::json::parse(r.stdout_text, nullptr, false);
    if (!list.is_array()) {
      const std::string said = r.stderr_text.substr(0, r.stderr_text.find('\n'));
      return Error{o.agent, "mutation-points " + name + ": " + r.Summary() + (said.empty() ? "" : ": " + said) +
                                " (the mutation analysis needs the test-only build, oarbank-agent-faulty)"};
    }
    for (const auto& p : list) {
      const std::string id = p.value("id", "");
      auto [it, fresh] = index.emplace(id, points.size());
      if (fresh) {
        MutantResult m;
        m.id = id;
        m.layer = p.value("layer", "");
        m.what = p.value("what", "");
        for (const auto& [var, value] : p["env"].items()) m.var = var, m.value = value.get<std::string>();
        points.push_back(std::move(m));
      }
      points[it->second].policies.push_back(name);
    }
  }
  return points;
}

struct Known {
  std::string outcome;
  std::vector<std::string> probes;  // of its killers, or of its changed cells
};

// An earlier report's outcome and killer probes by point.
Expected<std::map<std::string, Known>> LoadKnown(const std::string& path) {
  std::map<std::string, Known> known;
  if (path.empty()) return known;
  std::ifstream in(path);
  const auto doc = nlohmann::json::parse(in, nullptr, false);
  if (!doc.is_object() || doc.value("format", "") != kMutationFormat || !doc.contains("points"))
    return Error{path, std::string("not a ") + kMutationFormat + " report"};
  for (const auto& p : doc["points"]) {
    Known k;
    k.outcome = p.value("outcome", "");
    for (const char* list : {"killers", "changed"}) {
      for (const auto& c : p.value(list, nlohmann::json::array()))
        if (std::find(k.probes.begin(), k.probes.end(), c.value("probe", "")) == k.probes.end())
          k.probes.push_back(c.value("probe", ""));
      if (!k.probes.empty()) break;
    }
    known[p.value("id", "")] = k;
  }
  return known;
}

// The battery against the mutant; its escapes and other mismatches.
std::optional<Error> RunOne(const BatteryOptions& base, MutantResult& m, const std::vector<std::string>& probes) {
  BatteryOptions o = base;
  o.only_policies = m.policies;
  o.only_probes = probes;
  o.agent_env = {m.var + "=" + m.value};
  auto result = RunBattery(o);
  if (!result.ok()) return result.error();
  m.killers.clear();
  m.changed.clear();
  for (const auto& c : result.value().confined) {
    if (!IsFailure(c.outcome)) continue;
    MutantCell cell{c.probe, c.policy, c.entry, c.uid, c.run.Summary()};
    (c.outcome == Outcome::kEscaped ? m.killers : m.changed).push_back(cell);
  }
  m.outcome = !m.killers.empty() ? "killed" : !m.changed.empty() ? "changed" : "survived";
  return std::nullopt;
}

}  // namespace

Expected<MutationReport> RunMutants(const MutantOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  auto known = LoadKnown(options.killers);
  if (!known.ok()) return known.error();
  auto points = ListPoints(options.battery);
  if (!points.ok()) return points.error();
  MutationReport report;
  const HostFacts host = ProbeHost(options.battery.abi_cap);
  report.kernel = host.kernel_release;
  report.abi = host.landlock_abi;
  std::vector<MutantResult> list = std::move(points).value();
  for (auto& m : list) {
    if (!options.only_points.empty() &&
        std::find(options.only_points.begin(), options.only_points.end(), m.id) == options.only_points.end())
      continue;
    const auto t0 = std::chrono::steady_clock::now();
    const auto k = known.value().find(m.id);
    const bool was_known = k != known.value().end();
    if (was_known && k->second.outcome == "survived") {
      m.outcome = "known survivor";
    } else {
      // The earlier killers (or the probes whose answer changed) first: a
      // point they still kill, or still notice as before, needs no more.
      if (was_known && !k->second.probes.empty())
        if (auto error = RunOne(options.battery, m, k->second.probes)) return *error;
      if (m.outcome != "killed" && !(was_known && m.outcome == k->second.outcome))
        if (auto error = RunOne(options.battery, m, options.battery.only_probes)) return *error;
      if (m.outcome == "survived") ++report.new_survivors;
    }
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    report.points.push_back(std::move(m));
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

namespace {

nlohmann::ordered_json Cells(const std::vector<MutantCell>& cells) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& c : cells)
    out.push_back({{"probe", c.probe}, {"policy", c.policy}, {"entry", c.entry}, {"uid", c.uid}, {"actual", c.actual}});
  return out;
}

std::map<std::string, int> Counts(const MutationReport& r) {
  std::map<std::string, int> n = {{"killed", 0}, {"changed", 0}, {"survived", 0}, {"known survivor", 0}};
  for (const auto& p : r.points) ++n[p.outcome];
  return n;
}

std::string CellText(const MutantCell& c) {
  return c.probe + " [" + c.policy + (c.entry == "run" ? " (run)" : "") + ", " +
         (c.uid == 0 ? "root" : "uid " + std::to_string(c.uid)) + "]: " + c.actual;
}

}  // namespace

nlohmann::ordered_json MutationJson(const MutationReport& r) {
  const auto n = Counts(r);
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const auto& p : r.points)
    points.push_back({{"id", p.id},
                      {"layer", p.layer},
                      {"what", p.what},
                      {"env", {{p.var, p.value}}},
                      {"policies", p.policies},
                      {"outcome", p.outcome},
                      {"killers", Cells(p.killers)},
                      {"changed", Cells(p.changed)},
                      {"seconds", static_cast<int>(p.seconds * 10) / 10.0}});
  return {{"format", kMutationFormat},
          {"kernel", r.kernel},
          {"landlock_abi", r.abi},
          {"points", points},
          {"summary",
           {{"points", r.points.size()},
            {"killed", n.at("killed")},
            {"changed", n.at("changed")},
            {"survived", n.at("survived")},
            {"known_survivors", n.at("known survivor")},
            {"new_survivors", r.new_survivors}}},
          {"seconds", static_cast<int>(r.seconds * 10) / 10.0}};
}

std::string MutationMarkdown(const MutationReport& r) {
  std::ostringstream md;
  md << "# Mutation analysis\n\nLinux " << r.kernel << ", Landlock ABI " << r.abi << ": " << r.points.size()
     << " points in " << static_cast<int>(r.seconds) << " s.\n\n| point | layer | outcome | killed by | what |\n"
     << "|---|---|---|---|---|\n";
  for (const auto& p : r.points) {
    const auto& cells = p.killers.empty() ? p.changed : p.killers;
    md << "| `" << p.id << "` | " << p.layer << " | " << p.outcome << " | "
       << (cells.empty()
               ? std::string("-")
               : CellText(cells.front()) + (cells.size() > 1 ? " (+" + std::to_string(cells.size() - 1) + ")" : ""))
       << " | " << p.what << " |\n";
  }
  return md.str();
}

std::string MutationHtml(const MutationReport& r) {
  std::ostringstream h;
  h << "<!doctype html><meta charset=utf-8><title>oarbank mutation analysis</title><style>"
       "td,th{border:1px solid #ccc;padding:2px 6px}td.killed{background:#9be39b}td.changed{background:#f7dc8c}"
       "td.survived{background:#f08a80;font-weight:bold}</style><h1>Mutation analysis</h1><p>Linux "
    << Escape(r.kernel) << ", Landlock ABI " << r.abi << ": " << r.points.size() << " points in "
    << static_cast<int>(r.seconds) << " s.</p><table><tr><th>point<th>layer<th>outcome<th>cells<th>what";
  for (const auto& p : r.points) {
    std::string cells;
    for (const auto* list : {&p.killers, &p.changed})
      for (const auto& c : *list) cells += Escape(CellText(c)) + "<br>";
    h << "<tr><td><code>" << Escape(p.id) << "</code><td>" << p.layer << "<td class=\""
      << (p.outcome == "known survivor" ? "survived" : p.outcome) << "\">" << p.outcome << "<td>" << cells << "<td>"
      << Escape(p.what);
  }
  h << "</table>\n";
  return h.str();
}

std::string MutationSummary(const MutationReport& r) {
  std::string out;
  for (const auto& p : r.points)
    if (p.outcome == "survived") out += "  SURVIVED  " + p.id + ": " + p.what + "\n";
  const auto n = Counts(r);
  out += "oarbank-conform mutants: " + std::to_string(r.points.size()) + " points: " + std::to_string(n.at("killed")) +
         " killed, " + std::to_string(n.at("changed")) + " changed, " + std::to_string(n.at("survived")) +
         " survived (" + std::to_string(r.new_survivors) + " new), " + std::to_string(n.at("known survivor")) +
         " known survivors not rerun, in " + std::to_string(static_cast<int>(r.seconds)) + " s\n";
  return out;
}

}  // namespace oarbank
