#include "sandbox/common/helper_path.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

namespace oarbank {

std::string HelperPathFor(const std::string& program, const std::string& name, const std::string& installed) {
  char real[PATH_MAX];
  if (realpath(program.c_str(), real) != nullptr) {
    const std::string file = real;
    const std::string beside = file.substr(0, file.rfind('/') + 1) + name;
    if (access(beside.c_str(), X_OK) == 0) return beside;
  }
  return installed;
}

}  // namespace oarbank
