// The verification gate: a launcher that skipped a step is killed before
// exec (through the test-only agent), and the pure checks of what the gate
// reads in /proc.
#include <sched.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>

#include "sandbox/common/unique_fd.h"
#include "sandbox/host/root_etc.h"
#include "sandbox/supervise/supervisor_test.h"
#include "sandbox/supervise/verify.h"

namespace oarbank {
namespace {

// ---- the verification gate, with a launcher that skips a step ----------

#ifdef OARBANK_AGENT_FAULTY
struct CliRun {
  int status = -1;
  nlohmann::json result;
  std::string raw;
};

// `oarbank-agent-faulty run --json` as `uid`, with OARBANK_FAULT_SKIP_STEP.
CliRun RunFaultyAgent(uid_t uid, const std::string& policy, const std::string& skip, const std::string& command) {
  const auto child = ExecInChild(
      {OARBANK_AGENT_FAULTY, "run", "--unproven", "--json", policy, "--", "/bin/sh", "-c", command}, uid, [&] {
        if (skip.empty())
          unsetenv("OARBANK_FAULT_SKIP_STEP");
        else
          setenv("OARBANK_FAULT_SKIP_STEP", skip.c_str(), 1);
      });
  CliRun run;
  run.raw = child.text;
  run.status = child.status;
  run.result = nlohmann::json::parse(run.raw, nullptr, false);
  return run;
}

class GateTest : public AsUidTest {
 protected:
  void SetUp() override {
    AsUidTest::SetUp();
    if (IsSkipped()) return;
    policy_ = tree_.Path("policy.json");
    tree_.Write("policy.json", tree_.RunnerJson(), 0644);
  }
  TempTree tree_;
  std::string policy_;
};

TEST_P(GateTest, ALauncherThatSkippedAStepIsKilledBeforeExec) {
  const std::string marker = tree_.Path("work/ran");
  const std::string command = "touch " + marker;
  // Positive control: the faulty build with no fault runs the module.
  const CliRun ok = RunFaultyAgent(GetParam(), policy_, "", command);
  ASSERT_FALSE(ok.result.is_discarded()) << ok.raw;
  EXPECT_EQ(ok.result["fault"], "none") << ok.raw;
  EXPECT_TRUE(std::filesystem::exists(marker));
  std::filesystem::remove(marker);

  // A core limit the launcher would inherit and must lower: a hard limit
  // already 0 here would let a skipped no-core-dumps step pass unseen.
  const rlimit core_allowed{0, RLIM_INFINITY};
  if (getuid() == 0) {
    ASSERT_EQ(setrlimit(RLIMIT_CORE, &core_allowed), 0) << strerror(errno);
  }

  // Each skipped step, and what refuses the launcher before its exec.
  const std::pair<const char*, std::string> cases[] = {
      // The gate reads Seccomp 0 in /proc/<pid>/status.
      {"seccomp", "gate: the launcher is not confined: Seccomp is 0 (want 2: a filter)"},
      // In its user namespace the launcher holds every capability until
      // this step drops them: the gate reads CapEff (the full set).
      {"drop-capabilities", "gate: the launcher is not confined: CapEff is "},
      // The gate reads the flags of the job's root mount: / is not read-only.
      {"mount-namespace", "gate: the launcher is not confined: / is not mounted read-only"},
      // The gate reads the flags of the mount /dev/pts reaches: the host's (read-only).
      {"job-devices", "gate: the launcher is not confined: /dev/pts is not the job's own"},
      // The gate reads the launcher's limits with prlimit(2).
      {"no-core-dumps", "gate: the launcher is not confined: RLIMIT_CORE is "},
      // Without no_new_privs the kernel itself refuses Landlock (and seccomp)
      // to a process without CAP_SYS_ADMIN: the launcher stops there.
      {"no-new-privs", std::string("landlock: restrict_self : ") + strerror(EPERM)},
  };
  for (const auto& [step, reason_prefix] : cases) {
    const CliRun run = RunFaultyAgent(GetParam(), policy_, step, command);
    ASSERT_FALSE(run.result.is_discarded()) << step << ": " << run.raw;
    EXPECT_EQ(run.result["refused"], true) << step;
    EXPECT_EQ(run.result["fault"], "refused") << step;
    const std::string reason = run.result["reason"];
    EXPECT_EQ(reason.substr(0, reason_prefix.size()), reason_prefix) << step << ": " << reason;
    EXPECT_EQ(WIFEXITED(run.status) ? WEXITSTATUS(run.status) : -1, kExitNotEnforced) << step;
    EXPECT_FALSE(std::filesystem::exists(marker)) << step << ": the module ran";
  }
}

INSTANTIATE_TEST_SUITE_P(AsRootAndNobody, GateTest, ::testing::Values(uid_t{0}, kNobody), [](const auto& info) {
  return info.param == 0 ? std::string("root") : std::string("nobody");
});
#endif

// ---- pure parts ----------------------------------------------------------

constexpr char kConfinedStatus[] =
    "Name:\tsh\nPPid:\t42\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"
    "CapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n";

TEST(GateReadingTest, AConfinedLauncherPasses) {
  EXPECT_EQ(CheckGateReading(ParseProcStatus(kConfinedStatus), 42), std::nullopt);
}

TEST(GateReadingTest, EachMissingStepIsNamed) {
  auto with = [](const std::string& from, const std::string& to) {
    std::string s = kConfinedStatus;
    s.replace(s.find(from), from.size(), to);
    return ParseProcStatus(s);
  };
  EXPECT_EQ(CheckGateReading(with("NoNewPrivs:\t1", "NoNewPrivs:\t0"), 42), "NoNewPrivs is 0 (want 1)");
  EXPECT_EQ(CheckGateReading(with("Seccomp:\t2", "Seccomp:\t0"), 42), "Seccomp is 0 (want 2: a filter)");
  EXPECT_EQ(CheckGateReading(with("Seccomp_filters:\t1", "Seccomp_filters:\t0"), 42),
            "Seccomp_filters is 0 (want at least 1)");
  EXPECT_EQ(CheckGateReading(with("Seccomp_filters:\t1\n", ""), 42), "Seccomp_filters is absent (want at least 1)");
  EXPECT_EQ(CheckGateReading(with("CapEff:\t0000000000000000", "CapEff:\t0000000000200000"), 42),
            "CapEff is 0000000000200000 (want 0)");
  // capset could raise a permitted capability again: CapPrm must be empty too.
  EXPECT_EQ(CheckGateReading(with("CapPrm:\t0000000000000000", "CapPrm:\t0000000000000001"), 42),
            "CapPrm is 0000000000000001 (want 0)");
  EXPECT_EQ(CheckGateReading(with("CapAmb:\t0000000000000000", "CapAmb:\t0000000000000400"), 42),
            "CapAmb is 0000000000000400 (want 0)");
  // A recycled pid: another parent.
  EXPECT_EQ(CheckGateReading(ParseProcStatus(kConfinedStatus), 43), "PPid is 42, not the job's init 43");
  EXPECT_EQ(CheckGateReading(ParseProcStatus(""), 43), "PPid is absent, not the job's init 43");
}

// The supervisor's own namespaces, read before a job's gate, are this
// process's: each kind the gate can compare, as the kernel names it (a kind
// this kernel lacks, the time namespace before 5.6, reads as nothing).
TEST(GateReadingTest, TheSupervisorsOwnNamespacesAreThisProcesss) {
  const auto& own = OwnNamespaces();
  ASSERT_EQ(own.size(), 8u);
  for (const auto& [kind, link] : own) {
    char buf[128] = {};
    if (readlink(("/proc/self/ns/" + kind).c_str(), buf, sizeof buf - 1) < 0) {
      EXPECT_EQ(errno, ENOENT) << kind;
      EXPECT_EQ(link, "") << kind;
      continue;
    }
    EXPECT_EQ(link, buf) << kind;
    EXPECT_EQ(link.rfind(kind + ":[", 0), 0u) << link;
  }
  EXPECT_NE(own.at("user"), "");      // positive control: every kernel the cage runs on has it
  EXPECT_EQ(&OwnNamespaces(), &own);  // read once
}

// The mount a path reaches in a mount namespace of the test's own (a child
// in a new user and mount namespace): a tmpfs mounted noexec, one read-only,
// one plain, a link to the noexec one, and a directory on the read-only
// one with nothing mounted on it. Each line the child writes is one check.
TEST(GateReadingTest, EachPathIsCheckedOnTheMountItReaches) {
  TempTree tree;
  for (const char* d : {"noexec", "ro", "plain"}) ASSERT_EQ(mkdir(tree.Path(d).c_str(), 0755), 0);
  ASSERT_EQ(symlink(tree.Path("noexec").c_str(), tree.Path("link").c_str()), 0);
  const auto run = RunInChild([&] {
    const uid_t uid = getuid();
    const gid_t gid = getgid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return std::string("unshare: ") + strerror(errno);
    // Both ids mapped: a file made on the tmpfs needs an owner in each.
    for (const auto& [file, text] : {std::pair<std::string, std::string>{"setgroups", "deny"},
                                     {"uid_map", "0 " + std::to_string(uid) + " 1"},
                                     {"gid_map", "0 " + std::to_string(gid) + " 1"}}) {
      const UniqueFd fd(open(("/proc/self/" + file).c_str(), O_WRONLY | O_CLOEXEC));
      if (!fd.valid() || write(fd.get(), text.data(), text.size()) < 0) return file + ": " + strerror(errno);
    }
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("t", tree.Path("noexec").c_str(), "tmpfs", MS_NOEXEC, "size=64k") != 0 ||
        mount("t", tree.Path("ro").c_str(), "tmpfs", 0, "size=64k") != 0 ||
        mkdir(tree.Path("ro/inner").c_str(), 0755) != 0 ||
        mount(nullptr, tree.Path("ro").c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) != 0 ||
        mount("t", tree.Path("plain").c_str(), "tmpfs", 0, "size=64k") != 0)
      return std::string("mount: ") + strerror(errno);
    const UniqueFd root(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
    auto say = [](const std::optional<MountMiss>& miss) {
      return miss ? miss->path + (miss->err != 0 ? " " + std::string(strerrorname_np(miss->err)) : "") : "none";
    };
    std::string out;
    out += say(FirstMountWithout(root.get(), {tree.Path("noexec")}, ST_NOEXEC, true)) + "\n";
    out += say(FirstMountWithout(root.get(), {tree.Path("noexec"), tree.Path("plain")}, ST_NOEXEC, true)) + "\n";
    out += say(FirstMountWithout(root.get(), {tree.Path("ro"), tree.Path("ro/inner")}, ST_RDONLY, true)) + "\n";
    out += say(FirstMountWithout(root.get(), {tree.Path("plain")}, ST_RDONLY, false)) + "\n";
    out += say(FirstMountWithout(root.get(), {tree.Path("plain"), tree.Path("ro")}, ST_RDONLY, false)) + "\n";
    out += say(FirstMountWithout(root.get(), {tree.Path("link")}, ST_NOEXEC, true)) + "\n";
    out += say(FirstMountWithout(root.get(), {tree.Path("gone")}, ST_NOEXEC, true)) + "\n";
    return out;
  });
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.text;
  if (run.text.rfind("unshare: ", 0) == 0) GTEST_SKIP() << "no user namespace here: " << run.text;
  const std::vector<std::string> want = {
      "none",                         // the noexec mount
      tree.Path("plain"),             // the first without noexec
      "none",                         // a directory on a read-only mount is read-only too
      "none",                         // a writable mount, asked to be writable
      tree.Path("ro"),                // the first that is read-only where it must not be
      tree.Path("link") + " ELOOP",   // a link is never followed, even to the noexec mount
      tree.Path("gone") + " ENOENT",  // missing: said, never passed
  };
  std::vector<std::string> got;
  for (size_t at = 0, eol; (eol = run.text.find('\n', at)) != std::string::npos; at = eol + 1)
    got.push_back(run.text.substr(at, eol - at));
  EXPECT_EQ(got, want) << run.text;
}

// statfs(2) says read-only for a read-only mount and for a mount of a
// read-only filesystem alike; only the first stays read-only when the host
// makes the filesystem writable again. A mount with its own "ro" passes; a
// read-write bind of a filesystem mounted read-only does not, though
// statfs says ST_RDONLY for it.
TEST(GateReadingTest, ReadOnlyIsTheMountsOwnFlagNotItsFilesystems) {
  TempTree tree;
  for (const char* d : {"sb-ro", "bind-rw", "bind-ro"}) ASSERT_EQ(mkdir(tree.Path(d).c_str(), 0755), 0);
  const auto run = RunInChild([&] {
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return std::string("unshare: ") + strerror(errno);
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("t", tree.Path("sb-ro").c_str(), "tmpfs", MS_RDONLY, "size=64k") != 0 ||
        mount(tree.Path("sb-ro").c_str(), tree.Path("bind-rw").c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        mount(nullptr, tree.Path("bind-rw").c_str(), nullptr, MS_BIND | MS_REMOUNT, nullptr) != 0 ||
        mount(tree.Path("sb-ro").c_str(), tree.Path("bind-ro").c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        mount(nullptr, tree.Path("bind-ro").c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0)
      return std::string("mount: ") + strerror(errno);
    const UniqueFd root(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
    struct statfs fs {};
    if (statfs(tree.Path("bind-rw").c_str(), &fs) != 0 || (fs.f_flags & ST_RDONLY) == 0)
      return std::string("statfs does not say read-only for the bind: the case is not made");
    auto say = [](const std::optional<MountMiss>& miss) { return miss ? miss->path : std::string("none"); };
    return say(FirstNotMountedReadOnly(root.get(), "self", {tree.Path("bind-ro")})) + "\n" +
           say(FirstNotMountedReadOnly(root.get(), "self", {tree.Path("bind-ro"), tree.Path("bind-rw")})) + "\n";
  });
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.text;
  if (run.text.rfind("unshare: ", 0) == 0) GTEST_SKIP() << "no user namespace here: " << run.text;
  EXPECT_EQ(run.text, "none\n" + tree.Path("bind-rw") + "\n");
}

TEST(GateReadingTest, MountinfoOptionsAreReadOnTheLastMountOfAPath) {
  const std::string info =
      "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
      "90 22 8:1 /srv/w /srv/w rw,relatime - ext4 /dev/vda rw\n"
      "91 90 8:1 /srv/w /srv/w rw,nosuid,nodev,noexec,relatime - ext4 /dev/vda rw\n"
      "92 22 8:1 /srv/a\\040b /srv/a\\040b rw,noexec - ext4 /dev/vda rw\n";
  EXPECT_EQ(CheckMountOption(info, {"/srv/w", "/srv/a b"}, "noexec"), std::nullopt);
  EXPECT_EQ(CheckMountOption(info, {"/srv/w", "/srv/x"}, "noexec"), "/srv/x");
  // The escaped text is not a path of its own: a grant whose name holds a
  // backslash is not the mount of "/srv/a b".
  EXPECT_EQ(CheckMountOption(info, {"/srv/a\\040b"}, "noexec"), "/srv/a\\040b");
  // The last mount on a path wins: a later exec mount over the noexec one.
  EXPECT_EQ(CheckMountOption(info + "93 91 8:1 /srv/w /srv/w rw - ext4 /dev/vda rw\n", {"/srv/w"}, "noexec"), "/srv/w");
}

TEST(GateReadingTest, EachGrantMustBeTheInodeThePolicyNamed) {
  TempTree tree;
  const std::string a = tree.Path("work"), b = tree.Path("data"), link = tree.Path("link");
  ASSERT_EQ(symlink(a.c_str(), link.c_str()), 0);
  auto inode = [](const std::string& path) {
    struct stat st {};
    EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
    return FileId{st.st_dev, st.st_ino};
  };
  const UniqueFd root(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(root.valid());
  EXPECT_EQ(CheckMountedInodes(root.get(), {{a, inode(a)}, {b, inode(b)}, {"/", inode("/")}}), std::nullopt);
  // Another directory where the policy named `a` (it was swapped, or the bind is of something else).
  const auto swapped = CheckMountedInodes(root.get(), {{a, inode(b)}});
  ASSERT_TRUE(swapped.has_value());
  EXPECT_EQ(swapped->rfind(a + " in the job's view is another directory or file than the policy named", 0), 0u)
      << *swapped;
  // A link is never followed, even to the right inode.
  const auto linked = CheckMountedInodes(root.get(), {{link, inode(a)}});
  ASSERT_TRUE(linked.has_value());
  EXPECT_NE(linked->find("without following a link"), std::string::npos) << *linked;
  // Missing: said, never passed.
  EXPECT_TRUE(CheckMountedInodes(root.get(), {{tree.Path("gone"), inode(a)}}).has_value());
  // An inode the walk did not record (a test build's plan) is not checked.
  EXPECT_EQ(CheckMountedInodes(root.get(), {{link, FileId{}}}), std::nullopt);
}

// A root job's /etc as the launcher makes it (root_etc.h), in a mount
// namespace of the test's own: the idmapped view passes, the host's /etc
// bound plainly and an idmapped view of another directory do not.
TEST(GateReadingTest, ARootJobsEtcMustBeIdmapped) {
  if (geteuid() != 0) GTEST_SKIP() << "the idmapped view of /etc is made for root only";
  struct stat host {};
  ASSERT_EQ(stat("/etc", &host), 0);
  if (host.st_uid != 0) GTEST_SKIP() << "this host's /etc is not root's: the gate reads mountinfo instead";
  const RootEtcView view = OpenRootEtcView();
  if (!view.idmap) GTEST_SKIP() << "no idmapped mount here: " << view.detail;
  const auto run = RunInChild([&] {
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
      return std::string("mount namespace: ") + strerror(errno);
    const UniqueFd root(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
    auto say = [](const std::optional<std::string>& why) { return why ? *why : std::string("none"); };
    std::string out = say(CheckRootEtcView(root.get(), host)) + "\n";  // the host's /etc as it is
    const int tree = MakeRootEtcTree(view.idmap->get());
    if (tree < 0) return std::string("MakeRootEtcTree: ") + strerror(-tree);
    if (int err = AttachRootEtcTree(tree)) return std::string("AttachRootEtcTree: ") + strerror(err);
    out += say(CheckRootEtcView(root.get(), host)) + "\n";  // the view
    struct stat other = host;
    other.st_ino += 1;  // the view, where another directory was expected
    out += say(CheckRootEtcView(root.get(), other)) + "\n";
    return out;
  });
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.text;
  const std::string no = "a root job's /etc is not the idmapped view (root_etc.h): ";
  EXPECT_EQ(run.text, no + "it is owned by uid 0 (want 65534)\nnone\n" + no + "another directory\n");
}

// On a host whose /etc is not root's, the gate reads the mount's flag.
TEST(GateReadingTest, ARootJobsEtcIsReadInMountinfoWhereItsOwnerSaysNothing) {
  const std::string info = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n";
  EXPECT_EQ(CheckMountOption(info, {"/etc"}, "idmapped"), "/etc");
  EXPECT_EQ(CheckMountOption(info + "42 22 8:1 /etc /etc ro,nosuid,nodev,relatime,idmapped - ext4 /dev/vda rw\n",
                             {"/etc"}, "idmapped"),
            std::nullopt);
}

}  // namespace
}  // namespace oarbank
