// Landlock's user-space API, by ABI version. The installed kernel headers
// (Linux 6.1) know only ABI 2, so every newer constant is defined here from
// the kernel's documented UAPI values (include/uapi/linux/landlock.h).
//
// Each ABI is the previous one plus what it adds, written as a switch over a
// closed enum with no `default:` (-Werror=switch), so a new ABI cannot be
// added without deciding what it handles.
#pragma once

#include <cstdint>

namespace oarbank {

enum class LandlockAbi : int {
  kNone = 0,
  kV1 = 1,    // Linux 5.13: filesystem access rights
  kV2 = 2,    // Linux 5.19: REFER (rename/link across directories)
  kV3 = 3,    // Linux 6.2:  TRUNCATE
  kV4 = 4,    // Linux 6.7:  TCP bind/connect by port
  kV5 = 5,    // Linux 6.10: IOCTL_DEV
  kV6 = 6,    // Linux 6.12: scopes (abstract unix sockets, signals)
  kV7 = 7,    // Linux 6.15: audit logging flags for restrict_self
  kV8 = 8,    // Linux 7.0:  TSYNC (restrict all threads)
  kV9 = 9,    // Linux 7.1:  RESOLVE_UNIX (pathname unix socket connect/send)
  kV10 = 10,  // Linux 7.2:  UDP bind and connect/send by port; quiet rules
  kV11 = 11,  // Linux 7.3:  restrict_self sets no_new_privs itself
};
inline constexpr LandlockAbi kNewestKnownAbi = LandlockAbi::kV11;
inline constexpr int kNewestKnownAbiNumber = static_cast<int>(kNewestKnownAbi);

// A kernel newer than this file is used at the newest ABI we know: its extra
// rights are simply not handled (and so stay allowed), which is what every
// rule in this file was written against.
constexpr LandlockAbi ToAbi(int kernel_abi) {
  if (kernel_abi <= 0) return LandlockAbi::kNone;
  if (kernel_abi >= kNewestKnownAbiNumber) return kNewestKnownAbi;
  return static_cast<LandlockAbi>(kernel_abi);
}

// landlock_create_ruleset() flags.
inline constexpr uint32_t kLandlockCreateRulesetVersion = 1u << 0;  // ABI 1
inline constexpr uint32_t kLandlockCreateRulesetErrata = 1u << 1;   // Linux 6.15 (and stable backports)

// Rule types.
inline constexpr int kLandlockRulePathBeneath = 1;  // ABI 1
inline constexpr int kLandlockRuleNetPort = 2;      // ABI 4

// Filesystem rights.
inline constexpr uint64_t kFsExecute = 1ull << 0;
inline constexpr uint64_t kFsWriteFile = 1ull << 1;
inline constexpr uint64_t kFsReadFile = 1ull << 2;
inline constexpr uint64_t kFsReadDir = 1ull << 3;
inline constexpr uint64_t kFsRemoveDir = 1ull << 4;
inline constexpr uint64_t kFsRemoveFile = 1ull << 5;
inline constexpr uint64_t kFsMakeChar = 1ull << 6;
inline constexpr uint64_t kFsMakeDir = 1ull << 7;
inline constexpr uint64_t kFsMakeReg = 1ull << 8;
inline constexpr uint64_t kFsMakeSock = 1ull << 9;
inline constexpr uint64_t kFsMakeFifo = 1ull << 10;
inline constexpr uint64_t kFsMakeBlock = 1ull << 11;
inline constexpr uint64_t kFsMakeSym = 1ull << 12;
inline constexpr uint64_t kFsRefer = 1ull << 13;     // ABI 2
inline constexpr uint64_t kFsTruncate = 1ull << 14;  // ABI 3
inline constexpr uint64_t kFsIoctlDev = 1ull << 15;  // ABI 5
// ABI 9: connect/sendto to a pathname unix socket (EACCES), except to a
// socket whose server is in the same Landlock domain. A file right: a rule
// may name the socket itself.
inline constexpr uint64_t kFsResolveUnix = 1ull << 16;

// Rights that a rule on a regular file (not a directory) may carry.
inline constexpr uint64_t kFsFileRights =
    kFsExecute | kFsWriteFile | kFsReadFile | kFsTruncate | kFsIoctlDev | kFsResolveUnix;

// Network rights (ABI 4).
inline constexpr uint64_t kNetBindTcp = 1ull << 0;
inline constexpr uint64_t kNetConnectTcp = 1ull << 1;
inline constexpr uint64_t kNetBindUdp = 1ull << 2;         // ABI 10
inline constexpr uint64_t kNetConnectSendUdp = 1ull << 3;  // ABI 10

// Scopes (ABI 6).
inline constexpr uint64_t kScopeAbstractUnixSocket = 1ull << 0;
inline constexpr uint64_t kScopeSignal = 1ull << 1;

// The rights each ABI can handle: the previous ABI's plus its own.
constexpr uint64_t HandledFs(LandlockAbi abi) {
  switch (abi) {
    case LandlockAbi::kNone: return 0;
    case LandlockAbi::kV1:
      return kFsExecute | kFsWriteFile | kFsReadFile | kFsReadDir | kFsRemoveDir | kFsRemoveFile | kFsMakeChar |
             kFsMakeDir | kFsMakeReg | kFsMakeSock | kFsMakeFifo | kFsMakeBlock | kFsMakeSym;
    case LandlockAbi::kV2: return HandledFs(LandlockAbi::kV1) | kFsRefer;
    case LandlockAbi::kV3: return HandledFs(LandlockAbi::kV2) | kFsTruncate;
    case LandlockAbi::kV4: return HandledFs(LandlockAbi::kV3);
    case LandlockAbi::kV5: return HandledFs(LandlockAbi::kV4) | kFsIoctlDev;
    case LandlockAbi::kV6: return HandledFs(LandlockAbi::kV5);
    case LandlockAbi::kV7: return HandledFs(LandlockAbi::kV6);
    case LandlockAbi::kV8: return HandledFs(LandlockAbi::kV7);
    case LandlockAbi::kV9: return HandledFs(LandlockAbi::kV8) | kFsResolveUnix;
    case LandlockAbi::kV10: return HandledFs(LandlockAbi::kV9);
    case LandlockAbi::kV11: return HandledFs(LandlockAbi::kV10);
  }
  return 0;
}

constexpr uint64_t HandledNet(LandlockAbi abi) {
  switch (abi) {
    case LandlockAbi::kNone:
    case LandlockAbi::kV1:
    case LandlockAbi::kV2:
    case LandlockAbi::kV3: return 0;
    case LandlockAbi::kV4: return kNetBindTcp | kNetConnectTcp;
    case LandlockAbi::kV5:
    case LandlockAbi::kV6:
    case LandlockAbi::kV7:
    case LandlockAbi::kV8:
    case LandlockAbi::kV9: return HandledNet(LandlockAbi::kV4);
    case LandlockAbi::kV10: return HandledNet(LandlockAbi::kV9) | kNetBindUdp | kNetConnectSendUdp;
    case LandlockAbi::kV11: return HandledNet(LandlockAbi::kV10);
  }
  return 0;
}

constexpr uint64_t HandledScopes(LandlockAbi abi) {
  switch (abi) {
    case LandlockAbi::kNone:
    case LandlockAbi::kV1:
    case LandlockAbi::kV2:
    case LandlockAbi::kV3:
    case LandlockAbi::kV4:
    case LandlockAbi::kV5: return 0;
    case LandlockAbi::kV6: return kScopeAbstractUnixSocket | kScopeSignal;
    case LandlockAbi::kV7:
    case LandlockAbi::kV8:
    case LandlockAbi::kV9:
    case LandlockAbi::kV10:
    case LandlockAbi::kV11: return HandledScopes(LandlockAbi::kV6);
  }
  return 0;
}

// Size of struct landlock_ruleset_attr to pass: handled_access_fs (ABI 1),
// handled_access_net (ABI 4), scoped (ABI 6). The quiet_* fields of ABI 10
// are not used; the kernel accepts the shorter struct.
constexpr unsigned long RulesetAttrSize(LandlockAbi abi) {
  if (HandledScopes(abi) != 0) return 24;
  if (HandledNet(abi) != 0) return 16;
  return 8;
}

}  // namespace oarbank
