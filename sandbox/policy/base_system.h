// The base system every module may read and execute, and the device nodes it
// may read and write (the Linux backend, "base system"). One list, used by
// the parser (to refuse grants that would nest with it) and by the planner.
#pragma once

#include <array>
#include <string_view>

namespace oarbank {

inline constexpr std::array<std::string_view, 10> kBaseReadExecute = {
    "/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys/devices/system/cpu",
};

inline constexpr std::array<std::string_view, 5> kBaseDevices = {
    "/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/full",
};

// devices.gpu = "compute": these paths (a directory and a node) plus every
// /dev node whose name starts with kGpuNodePrefix.
inline constexpr std::array<std::string_view, 2> kGpuPaths = {"/dev/dri", "/dev/kfd"};
inline constexpr std::string_view kGpuNodePrefix = "/dev/nvidia";

}  // namespace oarbank
