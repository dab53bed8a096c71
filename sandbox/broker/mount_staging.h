// Where a container's mounts and output come from: each source pinned below
// the job's work or data directory without following a link, idmapped to
// the job's subordinate range and staged in the broker's own mount
// namespace; the output files created in the work directory for the job;
// what a run wrote checked afterwards. Internal to the broker.
#pragma once

#include <string>
#include <vector>

#include "sandbox/broker/container_runtime.h"
#include "sandbox/broker/protocol.h"
#include "sandbox/common/unique_fd.h"

namespace oarbank::broker {

// `rel` below `base_fd`: openat2(RESOLVE_BENEATH | NO_SYMLINKS |
// NO_MAGICLINKS | NO_XDEV), or the walk that stands for it
// (common/open_no_symlinks.h). The fd, or -1 with errno.
int OpenBeneath(int base_fd, const std::string& rel, int flags);

// <work>/.oarbank-broker/<file>, created for the job (never an existing
// file, never through a link the module planted); or invalid with `error`.
UniqueFd CreateOutputFile(const BrokerConfig& config, const RuntimeConfig& rt, const std::string& file,
                          std::string* error);

// Pins each mount source and stages it at <staging>/<name>/<i>; returns
// the staging paths, or none with `error`. `pinned` gets the sources' fds
// (for the check after the run).
std::vector<std::string> PinMounts(const RuntimeConfig& rt, const RunRequest& req, const std::string& name,
                                   std::vector<UniqueFd>* pinned, std::string* error);

// Detaches and removes what PinMounts staged for `name`.
void UnpinMounts(const RuntimeConfig& rt, const std::string& name, size_t count);

// After a run: no setuid/setgid bit and no device node survives in the
// writable mount `fd`, and nothing there is owned by the job's container
// ids. "" or why it could not be made so.
std::string CleanWritten(const RuntimeConfig& rt, int fd);

}  // namespace oarbank::broker
