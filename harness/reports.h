// The battery's reports: JSON (machines), JUnit XML (CI), a Markdown table
// and a self-contained HTML page with the probe x policy matrix coloured by
// outcome (reviewers). All four are written from the same BatteryResult.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "harness/battery.h"

namespace oarbank {

nlohmann::ordered_json BatteryJson(const BatteryResult& result);
std::string BatteryJunit(const BatteryResult& result);
std::string BatteryMarkdown(const BatteryResult& result);
std::string BatteryHtml(const BatteryResult& result);
// Short text for the terminal: counts, failures, the verdict line.
std::string BatterySummary(const BatteryResult& result);

// Makes `dir` (and its parents) and checks that it can take files: "" or
// one line saying why not, so a bad --out is refused before a run, not
// after it.
std::string PrepareReportDir(const std::string& dir);
// Writes one report whole: "" or one line naming the file and the error.
std::string WriteReportFile(const std::string& path, const std::string& text);
// `s` escaped for XML and HTML text and attributes.
std::string Escape(const std::string& s);

}  // namespace oarbank
