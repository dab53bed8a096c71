#include "harness/mutant_cover.h"

#include <algorithm>
#include <fstream>

namespace oarbank {

Expected<std::map<std::string, MutantCover>> LoadMutantCovers(const std::string& path) {
  std::map<std::string, MutantCover> covers;
  if (path.empty()) return covers;
  std::ifstream in(path);
  if (!in) return Error{path, "cannot read the mutation cover table"};
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (number == 1 || line.empty()) continue;  // header
    const std::string where = path + ":" + std::to_string(number);
    const size_t a = line.find('\t'), b = a == std::string::npos ? a : line.find('\t', a + 1);
    if (b == std::string::npos || line.find('\t', b + 1) != std::string::npos)
      return Error{where, "expected 3 tab-separated fields: point, cover, why"};
    MutantCover c{line.substr(0, a), line.substr(a + 1, b - a - 1), line.substr(b + 1), number};
    if (c.point.empty() || c.cover.empty() || c.why.empty()) return Error{where, "point, cover and why are required"};
    for (const auto& id : CoverPoints(c.cover))
      if (id.empty() || id == c.point) return Error{where, c.point + ": a cover names other points, joined by +"};
    if (!covers.emplace(c.point, c).second) return Error{where, c.point + " is listed twice"};
  }
  return covers;
}

std::vector<std::string> CoverPoints(const std::string& cover) {
  std::vector<std::string> ids;
  if (cover == "-") return ids;
  for (size_t start = 0;;) {
    const size_t plus = cover.find('+', start);
    ids.push_back(cover.substr(start, plus - start));
    if (plus == std::string::npos) return ids;
    start = plus + 1;
  }
}

std::vector<std::string> MergeFaultEnv(const std::vector<std::pair<std::string, std::string>>& vars) {
  std::vector<std::pair<std::string, std::string>> merged;
  for (const auto& [name, value] : vars) {
    auto it = std::find_if(merged.begin(), merged.end(), [&](const auto& m) { return m.first == name; });
    if (it == merged.end())
      merged.emplace_back(name, value);
    else
      it->second += "," + value;
  }
  std::vector<std::string> env;
  for (const auto& [name, value] : merged) env.push_back(name + "=" + value);
  return env;
}

}  // namespace oarbank
