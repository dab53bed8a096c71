// The build's seccomp programs (sandbox/seccomp/filter.h), for each
// architecture: precompiled.inc is written by seccomp_precompile when the
// rule table or the syscall table changes.
#include <cstring>
#include <iterator>

#include "sandbox/seccomp/filter.h"

namespace oarbank {
namespace {

struct PrecompiledEntry {
  const char* key;  // SeccompRowsKey of the rows it was compiled from
  size_t key_size;
  const sock_filter* program;
  size_t length;
  const sock_filter* table;  // MakeTableProgram's, for `highest`
  size_t table_length;
  int highest;
};

#include "sandbox/seccomp/precompiled.inc"

}  // namespace

PrecompiledFilters FindPrecompiled(const std::vector<SeccompRule>& rows, SeccompArch arch) {
  const std::string key = SeccompRowsKey(rows, arch);
  for (const auto& e : kPrecompiled)
    if (e.key_size == key.size() && memcmp(e.key, key.data(), key.size()) == 0)
      return {{e.program, e.length}, {e.table, e.table_length}, e.highest};
  return {};
}

std::span<const sock_filter> PrecompiledSeccomp(const std::vector<SeccompRule>& rows, SeccompArch arch) {
  return FindPrecompiled(rows, arch).rows;
}

}  // namespace oarbank
