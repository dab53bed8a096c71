// Tests for the Podman argv the broker builds (container_runtime.h): what
// is always there (--rm, the platform, limits, labels, id maps, no network)
// and what never is (privileged, host network, devices, extra sockets), and
// the runtime probe with a PATH lacking podman.
#include "sandbox/broker/container_runtime.h"
#include "sandbox/common/install_paths.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

namespace oarbank::broker {
namespace {

RuntimeConfig Config() {
  RuntimeConfig rt;
  rt.podman = "/usr/bin/podman";
  rt.runc = "/usr/sbin/runc";
  rt.container_init = "/usr/libexec/oarbank/oarbank-container-init";
  rt.state_dir = "/var/lib/oarbank/containers";
  rt.job_id = "job-7";
  rt.job_uid = 65534;
  rt.job_gid = 65534;
  rt.subid_base = 100065536;
  return rt;
}

RunRequest Request() {
  RunRequest r;
  r.image = "localhost/tool@sha256:" + std::string(64, 'a');
  r.platform = "linux/amd64";
  r.args = {"sh", "-c", "echo hi"};
  r.timeout_s = 10;
  r.cpus = 1.5;
  r.mem_gb = 0.5;
  r.cpu_quota_us = CpuQuotaUs(r.cpus);
  r.memory_bytes = MemoryBytes(r.mem_gb);
  Mount m;
  m.source = "/srv/work/out";
  m.destination = "/out";
  r.mounts.push_back(m);
  m.source = "/srv/data/cache";
  m.destination = "/cache";
  m.read_only = true;
  r.mounts.push_back(m);
  return r;
}

bool Has(const std::vector<std::string>& argv, const std::string& arg) {
  return std::find(argv.begin(), argv.end(), arg) != argv.end();
}

TEST(ContainerRuntime, RunArgvAlwaysHasTheJobsBounds) {
  const auto argv = BuildRunArgv(Config(), Request(), {"/state/mounts/c/0", "/state/mounts/c/1"}, "oarbank-job-7-1");
  ASSERT_GE(argv.size(), 3u);
  EXPECT_EQ(argv[0], "/usr/bin/podman");
  const auto run = std::find(argv.begin(), argv.end(), "run");
  ASSERT_NE(run, argv.end());
  EXPECT_EQ(*(run + 1), "--rm");
  for (const char* expected : {"--runtime=/usr/sbin/runc",
                               "--root=/var/lib/oarbank/containers/j1/storage",
                               "--runroot=/var/lib/oarbank/containers/j1/run",
                               "--storage-opt=vfs.imagestore=/var/lib/oarbank/containers/storage",
                               "--pull=never",
                               "--platform=linux/amd64",
                               "--label=oarbank.job=job-7",
                               "--name=oarbank-job-7-1",
                               "--cpu-period=100000",
                               "--cpu-quota=150000",
                               "--memory=536870912",
                               "--memory-swap=536870912",
                               "--network=none",
                               "--uidmap=0:100065536:65536",
                               "--gidmap=0:100065536:65536",
                               "--timeout=11",
                               "--security-opt=no-new-privileges",
                               "--security-opt=seccomp=/var/lib/oarbank/containers/seccomp.json",
                               "--http-proxy=false",
                               "--volume=/state/mounts/c/0:/out:rw,nosuid,nodev",
                               "--volume=/state/mounts/c/1:/cache:ro,nosuid,nodev"})
    EXPECT_TRUE(Has(argv, expected)) << expected;
  // The image, then the request's args, last.
  const auto image = std::find(argv.begin(), argv.end(), Request().image);
  ASSERT_NE(image, argv.end());
  EXPECT_EQ(std::vector<std::string>(image + 1, argv.end()), Request().args);
  // The request's own mount sources never reach podman: only the pinned ones.
  for (const auto& a : argv) EXPECT_EQ(a.find("/srv/"), std::string::npos) << a;
  // No --cpus (whose three decimals once turned 0.0001 into no quota at all).
  for (const auto& a : argv) EXPECT_NE(a.rfind("--cpus", 0), 0u) << a;
}

TEST(ContainerRuntime, RunArgvNeverWidens) {
  RunRequest r = Request();
  r.args = {"--privileged", "--network=host"};  // args of the container, after the image
  const auto argv = BuildRunArgv(Config(), r, {"/s/0", "/s/1"}, "n");
  const auto image = std::find(argv.begin(), argv.end(), r.image);
  for (auto it = argv.begin(); it != image; ++it) {
    for (const char* banned :
         {"--privileged", "--network=host", "--net=host", "--device", "--volumes-from", "--pid=host", "--ipc=host",
          "--uts=host", "--userns=host", "--cap-add", "--security-opt=seccomp=unconfined", ".sock"})
      EXPECT_EQ(it->find(banned), std::string::npos) << *it;
  }
  for (const char* expected : {"--pid=private", "--ipc=private", "--uts=private", "--cgroupns=private"})
    EXPECT_TRUE(Has(argv, expected)) << expected;
}

TEST(ContainerRuntime, AnAllowlistJobsContainerGetsTheJobsProxy) {
  RuntimeConfig rt = Config();
  rt.job_netns = "/run/oarbank/job-netns";
  rt.job_proxy = "http://127.0.0.1:3128";
  RunRequest r = Request();
  r.network = true;
  const auto argv = BuildRunArgv(rt, r, {"/s/0", "/s/1"}, "n");
  for (const char* name : {"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"})
    EXPECT_TRUE(Has(argv, std::string("--env=") + name + "=http://127.0.0.1:3128")) << name;
  r.network = false;  // no network: neither the namespace nor the proxy
  const auto none = BuildRunArgv(rt, r, {"/s/0", "/s/1"}, "n");
  EXPECT_TRUE(Has(none, "--network=none"));
  for (const auto& a : none) EXPECT_EQ(a.find("PROXY"), std::string::npos) << a;
}

TEST(ContainerRuntime, EgressAndRootJobs) {
  RuntimeConfig rt = Config();
  rt.job_uid = 0;
  rt.job_gid = 0;
  RunRequest r = Request();
  r.network = true;
  r.env = {{"A", "1"}};
  r.workdir = "/out";
  r.entrypoint = std::vector<std::string>{"/bin/sh", "-c"};
  rt.job_netns = "/run/oarbank/job-netns";
  const auto argv = BuildRunArgv(rt, r, {"/s/0", "/s/1"}, "n");
  // The job's own network namespace, never Podman's bridge.
  EXPECT_TRUE(Has(argv, "--network=ns:/run/oarbank/job-netns"));
  for (const auto& a : argv) EXPECT_EQ(a.find("bridge"), std::string::npos) << a;
  EXPECT_FALSE(Has(argv, "--network=none"));
  for (const auto& a : argv) EXPECT_EQ(a.find("PROXY"), std::string::npos) << a;  // no proxy: egress-any
  // Container root is the job's subordinate base, never host root.
  EXPECT_TRUE(Has(argv, "--uidmap=0:100065536:65536"));
  EXPECT_TRUE(Has(argv, "--gidmap=0:100065536:65536"));
  for (const auto& a : argv) EXPECT_EQ(a.rfind("--uidmap=0:0:", 0), std::string::npos) << a;
  EXPECT_TRUE(Has(argv, "--env=A=1"));
  EXPECT_TRUE(Has(argv, "--workdir=/out"));
  EXPECT_TRUE(Has(argv, "--entrypoint=[\"/bin/sh\",\"-c\"]"));
}

TEST(ContainerRuntime, EveryContainerStartsWithTheBrokersInitAndItsLifeline) {
  const auto argv = BuildRunArgv(Config(), Request(), {"/s/0", "/s/1"}, "n");
  EXPECT_TRUE(Has(argv, "--init"));
  EXPECT_TRUE(Has(argv, "--init-path=/usr/libexec/oarbank/oarbank-container-init"));
  EXPECT_TRUE(Has(argv, "--preserve-fds=1"));
  // Options, all of them, before the image.
  const auto image = std::find(argv.begin(), argv.end(), Request().image);
  ASSERT_NE(image, argv.end());
  EXPECT_LT(std::find(argv.begin(), argv.end(), "--init"), image);
}

TEST(ContainerRuntime, TheInitIsFoundBesideTheProgramOrInstalled) {
  const auto dir = std::filesystem::temp_directory_path() / ("obk-init-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto program = (dir / "oarbank-agent").string();
  close(open(program.c_str(), O_CREAT | O_WRONLY, 0755));
  EXPECT_EQ(ContainerInitPathFor(program), OARBANK_CONTAINER_INIT);  // none beside it
  const auto init = (dir / "oarbank-container-init").string();
  close(open(init.c_str(), O_CREAT | O_WRONLY, 0755));
  EXPECT_EQ(ContainerInitPathFor(program), init);
  std::filesystem::remove_all(dir);
}

TEST(ContainerRuntime, ProbeWithoutPodmanOnPath) {
  const RuntimeProbe p = ProbeRuntime("/nonexistent:/also-missing");
  EXPECT_FALSE(p.available);
  EXPECT_NE(p.detail.find("podman is not on PATH"), std::string::npos) << p.detail;
  // Relative PATH entries are never searched.
  EXPECT_FALSE(ProbeRuntime(".:bin").available);
}

TEST(ContainerRuntime, JobIds) {
  EXPECT_TRUE(IsJobId("job-7.a_b"));
  EXPECT_FALSE(IsJobId(""));
  EXPECT_FALSE(IsJobId("a b"));
  EXPECT_FALSE(IsJobId("x,label=y"));
  EXPECT_FALSE(IsJobId(std::string(65, 'a')));
  EXPECT_FALSE(IsJobId("."));
  EXPECT_FALSE(IsJobId(".."));
}

TEST(ContainerRuntime, EachRangeHasItsOwnStorageRoot) {
  RuntimeConfig rt = Config();
  EXPECT_EQ(SlotRoot(rt), "/var/lib/oarbank/containers/j1");
  rt.subid_base = 100000000 + 4095 * 65536;
  EXPECT_EQ(SlotRoot(rt), "/var/lib/oarbank/containers/j4095");
  rt.subid_base = 0;  // no lease: the agent's image store itself, nothing runs
  EXPECT_EQ(SlotRoot(rt), "");
  EXPECT_TRUE(Has(GlobalArgs(rt), "--root=/var/lib/oarbank/containers/storage"));
}

TEST(ContainerRuntime, StagingIsPerJobAndExact) {
  RuntimeConfig x = Config(), xy = Config();
  x.job_id = "X";
  xy.job_id = "X-y";
  EXPECT_EQ(StagingDir(x), "/var/lib/oarbank/containers/mounts/job-X");
  EXPECT_EQ(StagingDir(xy), "/var/lib/oarbank/containers/mounts/job-X-y");
  EXPECT_NE(StagingDir(xy).rfind(StagingDir(x) + "/", 0), 0u);
}

TEST(ContainerRuntime, SocketWalkRefusesSocketsAndWhatItCannotCheck) {
  char tmpl[] = "/tmp/obk-walk-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  ASSERT_EQ(mkdir((root + "/a").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((root + "/a/b").c_str(), 0755), 0);
  const int dir = open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dir, 0);
  EXPECT_EQ(SocketInTree(dir), "");
  const int s = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s/a/b/host.sock", root.c_str());
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_NE(SocketInTree(dir).find("holds a unix socket (host.sock)"), std::string::npos) << SocketInTree(dir);
  close(s);
  unlink(addr.sun_path);
  // Deeper than the walk goes: refused, not assumed clean.
  std::string deep = root + "/a";
  for (int i = 0; i <= kMaxWalkDepth; ++i) {
    deep += "/d";
    ASSERT_EQ(mkdir(deep.c_str(), 0755), 0);
  }
  EXPECT_NE(SocketInTree(dir).find("deeper than"), std::string::npos) << SocketInTree(dir);
  close(dir);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace oarbank::broker
