#include "sandbox/common/fault_hooks.h"

namespace oarbank {

FaultHooks fault_hooks;

}  // namespace oarbank
