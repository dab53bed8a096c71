// The battery's reports: JSON (machines), JUnit XML (CI), a Markdown table
// and a self-contained HTML page with the probe x policy matrix coloured by
// outcome (reviewers). All four are written from the same BatteryResult.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "battery.h"

namespace oarbank {

nlohmann::ordered_json BatteryJson(const BatteryResult& result);
std::string BatteryJunit(const BatteryResult& result);
std::string BatteryMarkdown(const BatteryResult& result);
std::string BatteryHtml(const BatteryResult& result);
// Short text for the terminal: counts, failures, the verdict line.
std::string BatterySummary(const BatteryResult& result);

}  // namespace oarbank
