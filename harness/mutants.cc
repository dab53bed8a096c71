#include "harness/mutants.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "harness/mutant_cover.h"
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

// The points the test-only agent lists for the policy at `path`: a JSON
// array, or an error naming the policy.
Expected<nlohmann::json> PointsOf(const BatteryOptions& o, const std::string& name, const std::string& path) {
  const ProbeRun r = SpawnProbe({o.agent, "mutation-points", path}, {"PATH=/usr/bin:/bin"}, 0, kListTimeoutMs);
  auto list = nlohmann::json::parse(r.stdout_text, nullptr, false);
  if (list.is_array()) return list;
  const std::string said = r.stderr_text.substr(0, r.stderr_text.find('\n'));
  return Error{o.agent, "mutation-points " + name + ": " + r.Summary() + (said.empty() ? "" : ": " + said) +
                            " (the mutation analysis needs the test-only build, oarbank-agent-faulty)"};
}

// A policy field that lets the job do more in namespaces of its own, the
// value that turns it off, and why the points it removes are not
// applicable to a policy that sets it.
struct Widening {
  const char* field;
  nlohmann::json off;
  const char* reason;
};
const Widening kWidenings[] = {
    {"ipc", "none",
     "n/a under ipc job: the job's own network namespace, which holds nothing but its loopback (and the egress "
     "proxy's listener), confines its sockets; this point would refuse the job's own servers"},
    {"debug", false,
     "n/a under debug: the job's own pid namespace, where nothing but its processes has a pid, and its init, not "
     "dumpable and outside its Landlock domain, confine tracing; this point would refuse the job's own debugger"},
};

// The points a policy that widens the cage by `w` lacks against the same
// policy without it: what the job's namespaces stand in for.
Expected<std::set<std::string>> RemovedBy(const BatteryOptions& o, const Widening& w, const std::string& name,
                                          const std::string& path, const nlohmann::json& with) {
  std::ifstream in(path);
  auto doc = nlohmann::json::parse(in, nullptr, false);
  if (!doc.is_object() || !doc.contains(w.field) || doc[w.field] == w.off) return std::set<std::string>{};
  doc[w.field] = w.off;
  const std::string without = path.substr(0, path.size() - 5) + "." + w.field + "-off.json";
  std::ofstream(without) << doc.dump();
  auto list = PointsOf(o, name + " (" + w.field + " off)", without);
  if (!list.ok()) return list.error();
  std::set<std::string> removed;
  for (const auto& p : list.value()) removed.insert(p.value("id", ""));
  for (const auto& p : with) removed.erase(p.value("id", ""));
  return removed;
}

// Every point of every policy, from the test-only agent, merged by id.
Expected<std::vector<MutantResult>> ListPoints(const BatteryOptions& o) {
  auto world = MakeWorld(o.probe_dir, o.uids, false);
  if (!world.ok()) return world.error();
  std::vector<MutantResult> points;
  std::map<std::string, size_t> index;
  std::map<std::string, std::vector<NotApplicable>> not_applicable;  // point -> the policies that widen it away
  for (const auto& name : PolicyNames(o)) {
    auto path = MaterializePolicy(*world.value(), o.policy_dir + "/" + name + ".json", name);
    if (!path.ok()) return path.error();
    auto list = PointsOf(o, name, path.value());
    if (!list.ok()) return list.error();
    for (const auto& p : list.value()) {
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
    for (const Widening& w : kWidenings) {
      auto removed = RemovedBy(o, w, name, path.value(), list.value());
      if (!removed.ok()) return removed.error();
      for (const auto& id : removed.value()) not_applicable[id].push_back({name, w.reason});
    }
  }
  for (auto& m : points)
    if (auto it = not_applicable.find(m.id); it != not_applicable.end()) m.not_applicable = it->second;
  return points;
}

struct Known {
  std::string outcome;
  std::vector<std::string> probes;  // of its killers, or of its changed cells
};

using CellKey = std::tuple<std::string, std::string, std::string, uid_t>;
CellKey KeyOf(const MutantCell& c) { return {c.probe, c.policy, c.entry, c.uid}; }

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

// The battery against the mutant (`env` removes its points); its escapes
// and other mismatches.
std::optional<Error> RunOne(const BatteryOptions& base, MutantResult& m, const std::vector<std::string>& probes,
                            const std::vector<std::string>& env) {
  BatteryOptions o = base;
  o.only_policies = m.policies;
  o.only_probes = probes;
  o.agent_env = env;
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

namespace {

// One run of the analysis: each point alone, then, where it was not killed
// and the cover table names what covers it, with its cover.
class Analysis {
 public:
  Analysis(const MutantOptions& o, std::map<std::string, Known> known, std::map<std::string, MutantCover> covers,
           std::vector<MutantResult> points)
      : o_(o), known_(std::move(known)), covers_(std::move(covers)), points_(std::move(points)) {}

  // The point settled: its outcome, killers and changed cells.
  std::optional<Error> Settle(MutantResult& m, int& new_survivors) {
    const auto k = known_.find(m.id);
    const bool was_known = k != known_.end();
    if (was_known && k->second.outcome == "survived") {
      m.outcome = "known survivor";
      return std::nullopt;
    }
    const auto c = covers_.find(m.id);
    if (was_known && k->second.outcome == "explained" && c != covers_.end() && c->second.cover == "-") {
      m.outcome = "explained";
      m.reason = c->second.why;
      return std::nullopt;
    }
    if (auto error = Alone(m, was_known ? &k->second : nullptr)) return error;
    if (m.outcome != "killed")
      if (auto error = Paired(m, was_known ? &k->second : nullptr)) return error;
    if (m.outcome == "survived") ++new_survivors;
    return std::nullopt;
  }

 private:
  // Removed alone: the earlier killers (or the probes whose answer changed)
  // first; a point they still kill, or still notice as before, needs no more.
  std::optional<Error> Alone(MutantResult& m, const Known* known) {
    if (known != nullptr && known->outcome == "killed in pair") return std::nullopt;  // its pair settles it
    const std::vector<std::string> env = MergeFaultEnv({{m.var, m.value}});
    if (known != nullptr && !known->probes.empty() && known->outcome != "killed in pair")
      if (auto error = RunOne(o_.battery, m, known->probes, env)) return error;
    if (m.outcome != "killed" && !(known != nullptr && m.outcome == known->outcome))
      if (auto error = RunOne(o_.battery, m, o_.battery.only_probes, env)) return error;
    return std::nullopt;
  }

  // Removed with its cover: killed when a cell escapes that did not with
  // the cover alone. A cover of "-" explains a survivor instead.
  std::optional<Error> Paired(MutantResult& m, const Known* known) {
    const auto c = covers_.find(m.id);
    if (c == covers_.end()) return std::nullopt;
    if (c->second.cover == "-") {  // its changed cells, if any, stay as the evidence
      m.outcome = "explained";
      m.reason = c->second.why;
      return std::nullopt;
    }
    std::vector<std::pair<std::string, std::string>> cover;  // the cover's variables
    for (const auto& id : CoverPoints(c->second.cover)) {
      const MutantResult* point = Find(id);
      if (point == nullptr) return std::nullopt;  // not a point of these policies
      cover.emplace_back(point->var, point->value);
    }
    m.paired_with = c->second.cover;
    m.reason = c->second.why;
    // The earlier pair killers first, then every probe.
    std::vector<MutantCell> killers;
    if (known != nullptr && known->outcome == "killed in pair" && !known->probes.empty())
      if (auto error = PairKillers(m, cover, known->probes, killers)) return error;
    if (killers.empty())
      if (auto error = PairKillers(m, cover, o_.battery.only_probes, killers)) return error;
    if (killers.empty()) return std::nullopt;
    m.outcome = "killed in pair";
    m.killers = std::move(killers);
    m.changed.clear();
    return std::nullopt;
  }

  // The cells of `probes` that escape with the point and its cover removed
  // together and not with the cover removed alone.
  std::optional<Error> PairKillers(const MutantResult& m, const std::vector<std::pair<std::string, std::string>>& cover,
                                   const std::vector<std::string>& probes, std::vector<MutantCell>& killers) {
    MutantResult pair = m, alone = m;
    auto both = cover;
    both.emplace_back(m.var, m.value);
    if (auto error = RunOne(o_.battery, pair, probes, MergeFaultEnv(both))) return error;
    if (pair.killers.empty()) return std::nullopt;
    if (auto error = RunOne(o_.battery, alone, probes, MergeFaultEnv(cover))) return error;
    const std::set<CellKey> cover_killers = Keys(alone.killers);
    for (auto& cell : pair.killers)
      if (!cover_killers.count(KeyOf(cell))) killers.push_back(std::move(cell));
    return std::nullopt;
  }

  const MutantResult* Find(const std::string& id) const {
    for (const auto& p : points_)
      if (p.id == id) return &p;
    return nullptr;
  }

  static std::set<CellKey> Keys(const std::vector<MutantCell>& cells) {
    std::set<CellKey> keys;
    for (const auto& c : cells) keys.insert(KeyOf(c));
    return keys;
  }

  const MutantOptions& o_;
  std::map<std::string, Known> known_;
  std::map<std::string, MutantCover> covers_;
  std::vector<MutantResult> points_;  // every point, as listed (the covers are looked up here)
};

}  // namespace

Expected<MutationReport> RunMutants(const MutantOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  auto known = LoadKnown(options.killers);
  if (!known.ok()) return known.error();
  auto covers = LoadMutantCovers(options.covers);
  if (!covers.ok()) return covers.error();
  auto points = ListPoints(options.battery);
  if (!points.ok()) return points.error();
  MutationReport report;
  const HostFacts host = ProbeHost(options.battery.abi_cap);
  report.kernel = host.kernel_release;
  report.abi = host.landlock_abi;
  std::vector<MutantResult> list = points.value();
  Analysis analysis(options, known.value(), covers.value(), list);
  for (auto& m : list) {
    if (!options.only_points.empty() &&
        std::find(options.only_points.begin(), options.only_points.end(), m.id) == options.only_points.end())
      continue;
    const auto t0 = std::chrono::steady_clock::now();
    if (auto error = analysis.Settle(m, report.new_survivors)) return *error;
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    report.points.push_back(std::move(m));
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

namespace {

// The first cells of a list: enough to name the probes that noticed a
// point (what --killers reruns first) without listing thousands of cells.
constexpr size_t kCellsListed = 8;

nlohmann::ordered_json Cells(const std::vector<MutantCell>& cells) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < cells.size() && i < kCellsListed; ++i) {
    const MutantCell& c = cells[i];
    out.push_back({{"probe", c.probe}, {"policy", c.policy}, {"entry", c.entry}, {"uid", c.uid}, {"actual", c.actual}});
  }
  return out;
}

std::map<std::string, int> Counts(const MutationReport& r) {
  std::map<std::string, int> n = {{"killed", 0},   {"killed in pair", 0}, {"changed", 0},
                                  {"survived", 0}, {"explained", 0},      {"known survivor", 0}};
  for (const auto& p : r.points) ++n[p.outcome];
  return n;
}

// The policies a point is not part of, each with the reason.
nlohmann::ordered_json NotApplicableJson(const MutantResult& p) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& n : p.not_applicable) out.push_back({{"policy", n.policy}, {"reason", n.reason}});
  return out;
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
                      {"paired_with", p.paired_with},
                      {"reason", p.reason},
                      {"not_applicable", NotApplicableJson(p)},
                      {"killers", Cells(p.killers)},
                      {"killer_cells", p.killers.size()},
                      {"changed", Cells(p.changed)},
                      {"changed_cells", p.changed.size()},
                      {"seconds", static_cast<int>(p.seconds * 10) / 10.0}});
  return {{"format", kMutationFormat},
          {"kernel", r.kernel},
          {"landlock_abi", r.abi},
          {"points", points},
          {"summary",
           {{"points", r.points.size()},
            {"killed", n.at("killed")},
            {"killed_in_pair", n.at("killed in pair")},
            {"changed", n.at("changed")},
            {"survived", n.at("survived")},
            {"explained", n.at("explained")},
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
    md << "| `" << p.id << "` | " << p.layer << " | " << p.outcome
       << (p.paired_with.empty() ? "" : " (with `" + p.paired_with + "`)") << " | "
       << (cells.empty()
               ? std::string("-")
               : CellText(cells.front()) + (cells.size() > 1 ? " (+" + std::to_string(cells.size() - 1) + ")" : ""))
       << " | " << p.what << (p.reason.empty() ? "" : ": " + p.reason)
       << (p.not_applicable.empty()
               ? ""
               : "; n/a under " + std::to_string(p.not_applicable.size()) + " policies that widen it away")
       << " |\n";
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
    const std::string klass = p.outcome == "known survivor"   ? "survived"
                              : p.outcome == "killed in pair" ? "killed"
                              : p.outcome == "explained"      ? "changed"
                                                              : p.outcome;
    h << "<tr><td><code>" << Escape(p.id) << "</code><td>" << p.layer << "<td class=\"" << klass << "\">" << p.outcome
      << (p.paired_with.empty() ? "" : " with <code>" + Escape(p.paired_with) + "</code>") << "<td>" << cells << "<td>"
      << Escape(p.what) << (p.reason.empty() ? "" : ": " + Escape(p.reason));
  }
  h << "</table>\n";
  return h.str();
}

nlohmann::ordered_json MutationScore(const std::string& path) {
  if (path.empty()) return nullptr;
  std::ifstream in(path);
  const auto doc = nlohmann::json::parse(in, nullptr, false);
  if (!doc.is_object() || doc.value("format", "") != kMutationFormat || !doc.contains("points") ||
      !doc["points"].is_array())
    return nullptr;
  std::set<std::string> policies;
  std::map<std::string, int> n = {{"killed", 0},   {"killed in pair", 0}, {"changed", 0},
                                  {"survived", 0}, {"explained", 0},      {"known survivor", 0}};
  for (const auto& p : doc["points"]) {
    ++n[p.value("outcome", "")];
    for (const auto& name : p.value("policies", nlohmann::json::array())) policies.insert(name.get<std::string>());
  }
  return {{"report", fs::path(path).filename().string()},
          {"kernel", doc.value("kernel", "")},
          {"landlock_abi", doc.value("landlock_abi", 0)},
          {"policies", policies},
          {"points", doc["points"].size()},
          {"killed", n["killed"]},
          {"killed_in_pair", n["killed in pair"]},
          {"changed", n["changed"]},
          {"survived", n["survived"] + n["known survivor"]},
          {"explained", n["explained"]}};
}

std::string MutationSummary(const MutationReport& r) {
  std::string out;
  for (const auto& p : r.points)
    if (p.outcome == "survived") out += "  SURVIVED  " + p.id + ": " + p.what + "\n";
  const auto n = Counts(r);
  out += "oarbank-conform mutants: " + std::to_string(r.points.size()) + " points: " + std::to_string(n.at("killed")) +
         " killed, " + std::to_string(n.at("killed in pair")) + " killed in a pair, " +
         std::to_string(n.at("changed")) + " changed, " + std::to_string(n.at("survived")) + " survived (" +
         std::to_string(r.new_survivors) + " new), " + std::to_string(n.at("explained")) + " explained, " +
         std::to_string(n.at("known survivor")) + " known survivors not rerun, in " +
         std::to_string(static_cast<int>(r.seconds)) + " s\n";
  return out;
}

}  // namespace oarbank
