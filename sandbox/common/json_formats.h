// The "format" member every JSON document the tools print or write opens
// with: "oarbank.<kind>/<n>", n raised only when a member changes meaning or
// goes away (adding a member keeps n: readers ignore members they do not
// know). docs/json/<kind>.md describes each; harness/test_json_formats.py
// checks the tools' output against those pages.
#pragma once

namespace oarbank {

inline constexpr const char* kReportFormat = "oarbank.report/1";      // sandbox-report
inline constexpr const char* kRunFormat = "oarbank.run/1";            // run --json
inline constexpr const char* kBatteryFormat = "oarbank.battery/1";    // oarbank-conform's battery.json
inline constexpr const char* kMutationFormat = "oarbank.mutation/1";  // oarbank-conform mutants' mutation.json
inline constexpr const char* kModuleFormat = "oarbank.module/1";      // oarbank-conform module's module.json
inline constexpr const char* kManifestCheckFormat = "oarbank.manifest-check/1";  // manifest-check --json
inline constexpr const char* kBrokerReplyFormat = "oarbank.broker-reply/1";      // each answer line of the broker
inline constexpr const char* kApprovalsFormat = "oarbank.approvals/1";           // the approval store (approve)
inline constexpr const char* kToolsFormat = "oarbank.tools/1";                   // manifest-policy --tools-file
// The attestation's, oarbank.attestation/1, is kAttestationFormat (attestation.h);
// the kernel matrix's, oarbank.matrix/1, is written by harness/matrix_report.py.

}  // namespace oarbank
