// Where one of the agent's helper programs is (oarbank-netfilter,
// oarbank-container-init): beside the running binary when an executable of
// that name is there (a build tree, or an installed tree moved as a whole),
// else where the install layout puts it.
#pragma once

#include <string>

namespace oarbank {

// `program`: a path to the running binary ("/proc/self/exe"); `name`: the
// helper's file name; `installed`: its path in the install layout.
std::string HelperPathFor(const std::string& program, const std::string& name, const std::string& installed);

}  // namespace oarbank
