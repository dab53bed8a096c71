// Which Landlock right a whiteout needs on this kernel, found by trying:
// Landlock erratum 4 changed it, and kernels (and their backports) differ.
#pragma once

#include <string>

namespace oarbank {

// In children with a Landlock domain over a fresh directory under /tmp
// (handling MAKE_CHAR and MAKE_REG), makes a whiteout there by
// renameat2(RENAME_WHITEOUT) and by mknodat(S_IFCHR, 0:0), each with
// MAKE_REG alone and then with MAKE_CHAR too: "rename R, mknod M", each
// "make_reg" (MAKE_REG alone is enough), "make_char" or "fails"; or
// "unknown: WHY" (no Landlock, no directory, no whiteout at all). A kernel
// without the fix answers "rename make_reg, mknod make_char"; one with it
// asks MAKE_REG for both. The cage never relies on the answer: its seccomp
// filter refuses RENAME_WHITEOUT and mknod of a character device 0:0.
std::string ProbeWhiteoutRight(int landlock_kernel_abi);

}  // namespace oarbank
