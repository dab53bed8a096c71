// The battery attestation binds a kernel, a launcher and a battery: each
// part that differs makes it prove nothing, and the reason names the part.
#include "sandbox/plan/attestation.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "sandbox/plan/stack_parts.h"
#include "sandbox/testing/test_util.h"

namespace oarbank {
namespace {

// This host, with a job network of two dynamic executables copied into
// `tree`: the stack (this test) and the helper (/bin/true).
HostFacts HostWithJobNetwork(const testing::TempTree& tree) {
  std::filesystem::copy_file("/proc/self/exe", tree.Path("stack"));
  std::filesystem::copy_file("/bin/true", tree.Path("helper"));
  HostFacts host = ProbeHost();
  host.job_network.stack_path = tree.Path("stack");
  host.job_network.helper_path = tree.Path("helper");
  return host;
}

class AttestationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/oarbank-attest-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    chmod(dir_.c_str(), 0755);
    path_ = dir_ + "/attestation.json";
    here_ = BindingForThisProcess(ProbeHost());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Attestation Written(const AttestationBinding& binding, std::vector<std::string> classes = {kClass}) {
    Attestation a;
    a.binding = binding;
    a.proven_classes = std::move(classes);
    EXPECT_EQ(WriteAttestation(path_, a), "");
    return ReadAttestation(path_, here_);
  }

  static constexpr const char* kClass = "runner net=none exec_writable=false gpu=none broker=no";
  std::string dir_, path_;
  AttestationBinding here_;
};

TEST_F(AttestationTest, TheBindingOfThisProcessIsComplete) {
  EXPECT_FALSE(here_.kernel_release.empty());
  EXPECT_EQ(here_.kernel_version.rfind("Linux version ", 0), 0u) << here_.kernel_version;
  EXPECT_EQ(here_.launcher_sha256.size(), 64u);
  EXPECT_EQ(here_.battery_sha256.size(), 64u);
  EXPECT_EQ(here_.battery_sha256, BatterySha256());
  EXPECT_GT(BatteryFiles().size(), 100u);
}

TEST_F(AttestationTest, AnAttestationOfThisHostProvesItsClasses) {
  const Attestation a = Written(here_);
  ASSERT_TRUE(a.present) << a.detail;
  EXPECT_EQ(a.proven_classes, std::vector<std::string>{kClass});
}

TEST_F(AttestationTest, EveryPartOfTheBindingMatters) {
  struct Case {
    const char* part;
    void (*forge)(AttestationBinding&);
  };
  const Case cases[] = {
      {"kernel.release", [](AttestationBinding& b) { b.kernel_release += "-other"; }},
      {"kernel.version", [](AttestationBinding& b) { b.kernel_version += " #2 SMP"; }},
      {"kernel.landlock_abi", [](AttestationBinding& b) { b.landlock_abi += 1; }},
      {"kernel.landlock_errata", [](AttestationBinding& b) { b.landlock_errata ^= 1; }},
      {"launcher.sha256",
       [](AttestationBinding& b) {
         b.launcher_sha256 = std::string(64, '0');
         b.launcher_stat = "0:0:0:0:0";  // another file: the digest decides
       }},
      {"battery.sha256", [](AttestationBinding& b) { b.battery_sha256 = std::string(64, 'f'); }},
  };
  for (const auto& c : cases) {
    AttestationBinding forged = here_;
    c.forge(forged);
    const Attestation a = Written(forged);
    EXPECT_FALSE(a.present) << c.part;
    EXPECT_NE(a.detail.find(std::string(c.part) + " differs"), std::string::npos) << a.detail;
    EXPECT_TRUE(a.proven_classes.empty());
  }
}

// The stat of the file that was hashed stands for its digest; any other
// file is hashed, and then the digest alone decides.
TEST_F(AttestationTest, TheLauncherIsTheFileThatWasHashedOrOneWithItsDigest) {
  EXPECT_FALSE(here_.launcher_stat.empty());
  AttestationBinding copy = here_;
  copy.launcher_stat = "1:2:3:4:5";  // a copy of the binary elsewhere: same digest
  EXPECT_TRUE(Written(copy).present);
  // The lazily hashed binding of a checker agrees with the eager one.
  const AttestationBinding lazy = BindingForThisProcess(ProbeHost(), LauncherHash::kWhenNeeded);
  EXPECT_TRUE(lazy.launcher_sha256.empty());
  EXPECT_EQ(lazy.launcher_stat, here_.launcher_stat);
  Attestation a;
  a.binding = copy;
  a.proven_classes = {kClass};
  ASSERT_EQ(WriteAttestation(path_, a), "");
  EXPECT_TRUE(ReadAttestation(path_, lazy).present);
  a.binding.launcher_sha256 = std::string(64, 'e');
  ASSERT_EQ(WriteAttestation(path_, a), "");
  const Attestation forged = ReadAttestation(path_, lazy);
  EXPECT_FALSE(forged.present);
  EXPECT_NE(forged.detail.find("launcher.sha256 differs"), std::string::npos) << forged.detail;
}

TEST_F(AttestationTest, OnlyTheProvenClassesAreProven) {
  const Attestation a = Written(here_, {"coordinator net=none exec_writable=false gpu=none broker=no"});
  ASSERT_TRUE(a.present);
  testing::TempTree tree;
  const Policy runner = tree.Runner();
  const std::string gap = ProofGap(a, runner);
  EXPECT_EQ(gap.rfind("battery.proven: ", 0), 0u);
  EXPECT_NE(gap.find(PolicyClass(runner)), std::string::npos);
  EXPECT_EQ(ProofGap(Written(here_, {PolicyClass(runner)}), runner), "");
}

TEST_F(AttestationTest, EgressAnyIsProvenOnlyWithTheJobNetworkTheBatteryRan) {
  testing::TempTree tree;
  const Policy egress_any = tree.Runner(R"("net": {"mode": "egress-any"})");
  const Policy none = tree.Runner();
  // The stack and the helper hashed where the host names them, with the
  // libraries the loader resolves for them (two dynamic executables here).
  const HostFacts host = HostWithJobNetwork(tree);
  const AttestationBinding with_network = BindingFor(host, "/proc/self/exe");
  ASSERT_EQ(with_network.stack_sha256.size(), 64u);
  ASSERT_EQ(with_network.helper_sha256.size(), 64u);
  ASSERT_FALSE(with_network.stack_libraries.empty());
  ASSERT_EQ(with_network.stack_modules.size(), StackKernelModules().size());
  const std::string library = with_network.stack_libraries.begin()->first;
  here_ = with_network;
  const std::vector<std::string> classes = {PolicyClass(egress_any), PolicyClass(none)};
  EXPECT_EQ(ProofGap(Written(with_network, classes), egress_any), "");

  struct Case {
    const char* part;
    void (*change)(AttestationBinding&);
  };
  for (const Case& c :
       {Case{"job_network.stack_sha256 (slirp4netns) differs",
             [](AttestationBinding& b) { b.stack_sha256 = std::string(64, 'a'); }},
        Case{"job_network.helper_sha256 (oarbank-netfilter) differs",
             [](AttestationBinding& b) { b.helper_sha256 = std::string(64, 'b'); }},
        Case{"job_network.stack_sha256 (slirp4netns) differs (attested: none",
             [](AttestationBinding& b) { b.stack_sha256.clear(); }},
        // A library upgraded, one the loader no longer resolves, one
        // it resolves now, a module rebuilt: each names itself.
        Case{"job_network.libraries /",
             [](AttestationBinding& b) { b.stack_libraries.begin()->second = std::string(64, 'c'); }},
        Case{"job_network.libraries /",
             [](AttestationBinding& b) { b.stack_libraries["/lib/gone.so.1"] = std::string(64, 'd'); }},
        Case{"differs (attested: none",
             [](AttestationBinding& b) { b.stack_libraries.erase(b.stack_libraries.begin()); }},
        Case{"job_network.kernel_modules nf_tables differs",
             [](AttestationBinding& b) { b.stack_modules["nf_tables"] = "sha256 " + std::string(64, 'e'); }},
        Case{"job_network.libraries: none could be listed",
             [](AttestationBinding& b) { b.stack_libraries.clear(); }}}) {
    AttestationBinding attested = with_network;
    c.change(attested);
    if (std::string(c.part) == "job_network.libraries: none could be listed") {
      // An attestation from before the libraries were bound, checked where
      // they cannot be listed either: nothing binds, nothing is proven.
      here_.stack_libraries.clear();
    }
    const Attestation a = Written(attested, classes);
    ASSERT_TRUE(a.present) << a.detail;  // the rest of the binding holds
    const std::string gap = ProofGap(a, egress_any);
    EXPECT_NE(gap.find(c.part), std::string::npos) << gap;
    EXPECT_NE(gap.find("battery.proven: "), std::string::npos) << gap;
    EXPECT_EQ(ProofGap(a, none), "") << "only the egress-any classes depend on the job network";
  }
  here_ = with_network;
  {
    Attestation a;
    a.binding = with_network;
    EXPECT_TRUE(AttestationJson(a)["job_network"]["libraries"].contains(library)) << library;
    EXPECT_TRUE(AttestationJson(a)["job_network"]["kernel_modules"].contains("nf_tables"));
  }
  // A stack whose libraries cannot be listed here proves nothing, even
  // against an attestation that says the same.
  here_.stack_libraries[tree.Path("stack")] = "unresolved: not a 64-bit ELF file";
  AttestationBinding same = with_network;
  same.stack_libraries = here_.stack_libraries;
  EXPECT_NE(ProofGap(Written(same, classes), egress_any).find("unresolved"), std::string::npos);
  here_ = with_network;
  // A host where the parts cannot be read proves no egress-any class.
  here_.stack_sha256.clear();
  EXPECT_NE(ProofGap(Written(with_network, classes), egress_any).find("here: none"), std::string::npos);
}

// The gate takes an attested digest for a job network file that still has
// the version (dev, inode, size, mtime, ctime) it was hashed at, and hashes
// any other: shown with attested digests that are not the files' own, which
// prove the class only while the versions match.
TEST_F(AttestationTest, AJobNetworkFileAtItsAttestedVersionIsNotHashedAgain) {
  testing::TempTree tree;
  const Policy egress_any = tree.Runner(R"("net": {"mode": "egress-any"})");
  const HostFacts host = HostWithJobNetwork(tree);
  const AttestationBinding real = BindingFor(host, "/proc/self/exe");
  ASSERT_TRUE(real.stack_file_versions.contains(tree.Path("stack")));
  ASSERT_TRUE(real.stack_file_versions.contains(tree.Path("helper")));
  const std::string library = real.stack_libraries.begin()->first;
  ASSERT_TRUE(real.stack_file_versions.contains(library)) << library;
  const std::vector<std::string> classes = {PolicyClass(egress_any)};
  auto gap = [&](const AttestationBinding& attested) {
    Attestation a;
    a.binding = attested;
    a.proven_classes = classes;
    EXPECT_EQ(WriteAttestation(path_, a), "");
    const Attestation read = ReadAttestationForThisProcess(path_, host);
    EXPECT_TRUE(read.present) << read.detail;
    return ProofGap(read, egress_any);
  };
  EXPECT_EQ(gap(real), "");
  AttestationBinding fake = real;
  fake.stack_sha256 = std::string(64, 'a');
  fake.stack_libraries[library] = std::string(64, 'c');
  EXPECT_EQ(gap(fake), "") << "files at their attested versions are not read again";
  // A library whose version differs is hashed, and its digest decides.
  AttestationBinding other_version = fake;
  other_version.stack_sha256 = real.stack_sha256;
  other_version.stack_file_versions[library] += "1";
  EXPECT_NE(gap(other_version).find("job_network.libraries " + library + " differs"), std::string::npos);
  // The stack written and put back byte for byte, its mtime restored: the
  // ctime moved, so it is hashed (and its real digest is not the fake one).
  struct stat before {};
  ASSERT_EQ(stat(tree.Path("stack").c_str(), &before), 0);
  { std::ofstream(tree.Path("stack"), std::ios::app) << 'x'; }
  ASSERT_EQ(truncate(tree.Path("stack").c_str(), before.st_size), 0);
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, tree.Path("stack").c_str(), times, 0), 0);
  fake.stack_libraries[library] = real.stack_libraries.at(library);
  EXPECT_NE(gap(fake).find("job_network.stack_sha256 (slirp4netns) differs"), std::string::npos);
  EXPECT_EQ(gap(real), "") << "its content is the attested one";
  // An attestation without versions (an older one) hashes everything.
  AttestationBinding unversioned = real;
  unversioned.stack_file_versions.clear();
  EXPECT_EQ(gap(unversioned), "");
  unversioned.stack_libraries[library] = std::string(64, 'c');
  EXPECT_NE(gap(unversioned).find(library), std::string::npos);
}

TEST_F(AttestationTest, NoFileOrAnotherFormatProvesNothing) {
  Attestation a = ReadAttestation(path_, here_);
  EXPECT_FALSE(a.present);
  EXPECT_NE(a.detail.find("run oarbank-conform"), std::string::npos);
  // The format of the previous attestation, without "format" or a kernel version.
  std::ofstream(path_)
      << R"({"kernel_release": "x", "landlock_abi": 7, "agent_fingerprint": "0", "proven_classes": []})";
  chmod(path_.c_str(), 0644);
  a = ReadAttestation(path_, here_);
  EXPECT_FALSE(a.present);
  EXPECT_NE(a.detail.find("is not a battery attestation"), std::string::npos) << a.detail;
}

TEST_F(AttestationTest, MembersTheReaderDoesNotKnowAreIgnored) {
  // A later oarbank.attestation/1 may add members (docs/json/attestation.md):
  // at the top and in each object, they change nothing.
  Attestation a;
  a.binding = here_;
  a.proven_classes = {kClass};
  nlohmann::ordered_json j = AttestationJson(a);
  j["signed_by"] = {{"key", "x"}};
  j["kernel"]["cmdline"] = "quiet";
  j["launcher"]["path"] = "/usr/bin/oarbank-agent";
  j["battery"]["probes"] = 104;
  std::ofstream(path_) << j.dump(2);
  chmod(path_.c_str(), 0644);
  const Attestation read = ReadAttestation(path_, here_);
  ASSERT_TRUE(read.present) << read.detail;
  EXPECT_EQ(read.proven_classes, std::vector<std::string>{kClass});
  // The format is what is checked: another number is another document.
  j["format"] = "oarbank.attestation/2";
  std::ofstream(path_) << j.dump(2);
  EXPECT_FALSE(ReadAttestation(path_, here_).present);
}

TEST_F(AttestationTest, AnAttestationAnotherUserCouldWriteProvesNothing) {
  if (geteuid() != 0) GTEST_SKIP() << "chown needs root";
  Written(here_);
  ASSERT_EQ(chown(path_.c_str(), 65534, 65534), 0);
  const Attestation a = ReadAttestation(path_, here_);
  EXPECT_FALSE(a.present);
  EXPECT_NE(a.detail.find("owned by uid 65534"), std::string::npos) << a.detail;
}

TEST_F(AttestationTest, WrittenWithMode0644WhateverTheUmask) {
  const mode_t old = umask(0);
  Written(here_);
  umask(old);
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
}

}  // namespace
}  // namespace oarbank
