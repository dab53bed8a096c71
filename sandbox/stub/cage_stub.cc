// <oarbank/cage.h> where the cage cannot exist: off Linux (and on Linux
// with -DOARBANK_STUB=ON, which CI builds so the stub stays compiled and
// tested). A program that links the library still compiles and runs there,
// and fails closed: Available() is false with its reason, and every Run is
// refused before anything is started. No code here can execute a job's
// argv: it has no fork, exec or spawn.
#include "oarbank/cage.h"

namespace oarbank::cage {
namespace {

constexpr char kReason[] =
    "this is oarbank-sandbox's stub build: the cage needs Linux (Landlock, seccomp, user namespaces), so nothing "
    "runs here";

}  // namespace

Availability CheckAvailability() {
  Availability a;
  a.reason = kReason;
  a.proof_detail = kReason;
  return a;
}

bool Available() { return false; }

Result Run(const Spec&, const RunOptions&) {
  Result r;
  r.fault = Fault::kRefused;
  r.reason = std::string("sandbox: CAPABILITY_NOT_ENFORCED: ") + kReason;
  return r;
}

Result Run(const Spec& spec) { return Run(spec, RunOptions{}); }

}  // namespace oarbank::cage

// A marker the package build looks for: an installed library that holds it
// is the stub, which a Linux package must never ship.
extern "C" const char oarbank_sandbox_stub_build[] = "stub";
