// Which Landlock right a whiteout needs on this kernel, found by trying:
// Landlock erratum 4 changed it, and kernels (and their backports) differ.
#pragma once

#include <string>

namespace oarbank {

// In a child with a Landlock domain over a fresh directory under /tmp
// (handling MAKE_CHAR and MAKE_REG), renames a file there with
// RENAME_WHITEOUT: "make_reg" when MAKE_REG alone lets the whiteout be made
// (a kernel without the fix), "make_char" when MAKE_CHAR is needed too, or
// "unknown: WHY" (no Landlock, no RENAME_WHITEOUT on /tmp's filesystem, no
// directory). The cage never relies on the answer: its seccomp filter
// refuses RENAME_WHITEOUT.
std::string ProbeWhiteoutRight(int landlock_kernel_abi);

}  // namespace oarbank
