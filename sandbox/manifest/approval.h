// Approval (the module contract, "Approval"): a version whose [sandbox]
// requests anything runs nowhere until an operator approves its exact
// requests. The requests are reduced to one canonical form (every default
// made explicit, lists sorted, hosts lower case with their port) and that
// text to a SHA-256 digest; the approval record {module, version, digest,
// who, when} is kept as JSON and audited.
//
// The canonical form names the module and its version, so a new version
// always needs its own approval even when it requests the same grants, and
// any change to a request changes the digest. A version that requests
// nothing needs no approval. CheckApproved is what the agent runs before it
// turns a manifest into a Policy (manifest_policy.h); it never approves.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sandbox/common/expected.h"
#include "sandbox/manifest/manifest.h"

namespace oarbank {

// Compact JSON, keys sorted, no whitespace: the exact text the digest covers.
std::string CanonicalRequests(const Manifest& manifest);
// "sha256:<64 hex>" of CanonicalRequests.
std::string RequestsDigest(const Manifest& manifest);

// What the approval screen flags: tools that run arbitrary code, the GPU
// (it widens the kernel surface), egress-any (full trust), exec_writable,
// containers. Empty when nothing needs an operator's attention.
std::vector<std::string> ApprovalFlags(const Manifest& manifest);

struct ApprovalRecord {
  std::string module;
  std::string version;
  std::string digest;
  std::string who;
  std::string when;  // UTC, "2026-11-29T12:00:00Z"
};

// The store: {"approvals": [record, ...]}. A missing file is an empty
// store; anything else malformed is an Error naming the record and field.
// It is a trust file (trust_file.h): a store that someone other than root
// (or the agent's uid) could have written is refused.
Expected<std::vector<ApprovalRecord>> LoadApprovals(const std::string& path);

// Makes the record for an operator's approval of this manifest's requests.
// A manifest that requests nothing has nothing to approve (an Error).
Expected<ApprovalRecord> MakeApproval(const Manifest& manifest, const std::string& who, const std::string& when);

// Appends a record (replacing none: the store is an audit trail) under an
// exclusive lock on "<path>.lock", writing the store atomically (an
// exclusively created temporary file renamed over it, mode 0644). A planted
// store, lock or directory (a link, a FIFO, another owner) is refused.
std::optional<Error> AppendApproval(const std::string& path, const ApprovalRecord& record);

// Nothing when the manifest requests nothing or a record approves exactly
// this module, version and digest; otherwise why not, naming what differs
// (another digest for this version: the requests changed; only other
// versions approved: a new version needs its own approval).
std::optional<Error> CheckApproved(const Manifest& manifest, const std::vector<ApprovalRecord>& approvals);

// Now, as "YYYY-MM-DDTHH:MM:SSZ".
std::string UtcNow();

}  // namespace oarbank
