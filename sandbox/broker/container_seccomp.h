// The seccomp profile of the broker's containers: Podman's own default
// profile with unix sockets taken out.
//
// A host process (the job's user's own daemon, git's fsmonitor) may create
// a unix socket in a directory mounted into a running container after the
// broker checked the mount; if the container could connect to it, it would
// reach a host service. A rule per path needs Landlock's RESOLVE_UNIX
// (ABI 9, Linux 7.1), which the container's kernel may lack; checking the
// mounts again while the container runs races with the host; a private copy
// would break the live output mount. So a container gets no unix socket of
// its own: socket(AF_UNIX) gets the profile's default answer (ENOSYS in
// Podman's), and the socketcall
// multiplexer, whose family a filter cannot read, is left out. socketpair
// stays (it reaches nothing outside). Every other family the default
// profile allows keeps its rule; any family it names in no rule gets the
// profile's default answer.
#pragma once

#include <string>

#include "sandbox/common/expected.h"

namespace oarbank::broker {

// Where Debian's containers-common installs the default profile.
inline constexpr char kDefaultSeccompProfile[] = "/usr/share/containers/seccomp.json";

// `default_profile` (the text of Podman's default profile) with the
// socket rules replaced: AF_INET, AF_INET6 and AF_PACKET allowed, AF_NETLINK
// without NETLINK_AUDIT, no rule for AF_UNIX or any other family; no
// socketcall. An
// Error when the text is not such a profile.
Expected<std::string> ContainerSeccompProfile(const std::string& default_profile);

}  // namespace oarbank::broker
