// Fault's names, as the result's JSON and the CLI say them. Shared by the
// library and its stub build (sandbox/stub).
#include "oarbank/cage.h"

namespace oarbank::cage {

const char* FaultName(Fault fault) {
  switch (fault) {
    case Fault::kNone: return "none";
    case Fault::kRefused: return "refused";
    case Fault::kExec: return "exec";
    case Fault::kTimeout: return "timeout";
    case Fault::kOom: return "oom";
  }
  return "?";
}

}  // namespace oarbank::cage
