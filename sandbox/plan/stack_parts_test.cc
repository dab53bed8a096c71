// The parts of the job network the attestation binds besides its two
// programs: the libraries the loader resolves, the kernel modules' states.
#include "sandbox/plan/stack_parts.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>

#include "sandbox/testing/test_util.h"

namespace oarbank {
namespace {

bool Has(const std::vector<std::string>& v, const std::string& suffix) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.ends_with(suffix); });
}

TEST(StackParts, TheLoaderListsTheLibrariesOfADynamicExecutable) {
  std::vector<std::string> libraries;
  std::string why;
  ASSERT_TRUE(ResolvedLibraries("/bin/true", libraries, why)) << why;
  EXPECT_TRUE(Has(libraries, "/libc.so.6")) << "libc is resolved";
  EXPECT_TRUE(Has(libraries, "/ld-linux-x86-64.so.2") || Has(libraries, "/ld-linux-aarch64.so.1"))
      << "the loader itself is bound";
  for (const auto& library : libraries) EXPECT_EQ(library[0], '/') << "the vDSO is the kernel's: " << library;
}

TEST(StackParts, AStaticExecutableHasNoLibraries) {
  if (access("/bin/busybox", X_OK) != 0) GTEST_SKIP() << "no static /bin/busybox (busybox-static) here";
  std::vector<std::string> libraries = {"left over"};
  std::string why;
  ASSERT_TRUE(ResolvedLibraries("/bin/busybox", libraries, why)) << why;
  EXPECT_TRUE(libraries.empty());
}

TEST(StackParts, WhatIsNotAnElfExecutableIsUnresolved) {
  testing::TempTree tree;
  tree.Write("script", "#!/bin/sh\nexit 0\n", 0755);
  std::vector<std::string> libraries;
  std::string why;
  EXPECT_FALSE(ResolvedLibraries(tree.Path("script"), libraries, why));
  EXPECT_NE(why.find("not a 64-bit ELF file"), std::string::npos) << why;
  EXPECT_FALSE(ResolvedLibraries(tree.Path("absent"), libraries, why));
  mkfifo(tree.Path("fifo").c_str(), 0600);
  EXPECT_FALSE(ResolvedLibraries(tree.Path("fifo"), libraries, why)) << "a FIFO is refused, never waited on";
  const auto parts = StackLibraries({tree.Path("script"), "/bin/true"});
  ASSERT_TRUE(parts.contains(tree.Path("script")));
  EXPECT_FALSE(IsBindableState(parts.at(tree.Path("script"))));
  for (const auto& [path, state] : parts)
    if (path != tree.Path("script")) EXPECT_EQ(state.size(), 64u) << path << ": " << state;
}

TEST(StackParts, EachModuleIsBuiltinHashedAbsentOrUnreadable) {
  testing::TempTree tree;
  std::filesystem::create_directories(tree.Path("mods/kernel/net"));
  tree.Write("mods/modules.builtin", "kernel/drivers/net/tun.ko\n", 0644);
  tree.Write("mods/modules.dep",
             "kernel/net/nf_tables.ko.xz: kernel/net/nfnetlink.ko.xz\n"
             "kernel/net/nfnetlink.ko.xz:\n"
             "kernel/net/nft_ct.ko.xz: kernel/net/nf_tables.ko.xz\n",
             0644);
  tree.Write("mods/kernel/net/nf_tables.ko.xz", "module one", 0644);
  tree.Write("mods/kernel/net/nfnetlink.ko.xz", "module two", 0644);
  const std::vector<std::string> names = {"tun", "nf_tables", "nfnetlink", "nft_ct", "nft_nat"};
  auto states = KernelModuleStates(names, tree.Path("mods"), true);
  EXPECT_EQ(states["tun"], "builtin");
  EXPECT_EQ(states["nf_tables"].rfind("sha256 ", 0), 0u) << states["nf_tables"];
  EXPECT_NE(states["nf_tables"], states["nfnetlink"]);
  EXPECT_EQ(states["nft_ct"].rfind("unreadable", 0), 0u) << "listed, but its file is gone: " << states["nft_ct"];
  EXPECT_EQ(states["nft_nat"], "absent");
  // Another build of a module under the same release changes its state.
  tree.Write("mods/kernel/net/nf_tables.ko.xz", "module one, rebuilt", 0644);
  EXPECT_NE(KernelModuleStates(names, tree.Path("mods"), true)["nf_tables"], states["nf_tables"]);
  // No index to read: every module unreadable, none taken as absent.
  std::filesystem::remove(tree.Path("mods/modules.dep"));
  for (const auto& [name, state] : KernelModuleStates(names, tree.Path("mods"), true))
    EXPECT_FALSE(IsBindableState(state)) << name << ": " << state;
  // No module tree at all: nothing can be loaded from it.
  for (const auto& [name, state] : KernelModuleStates(names, tree.Path("no-such-tree"), true))
    EXPECT_EQ(state, "no module tree") << name;
  // A kernel without loadable modules: its version says what is built in.
  for (const auto& [name, state] : KernelModuleStates(names, tree.Path("nowhere"), false))
    EXPECT_EQ(state, "no loadable modules") << name;
}

}  // namespace
}  // namespace oarbank
