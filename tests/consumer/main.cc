// Calls cage::Run(Spec) through the installed <oarbank/cage.h> and checks
// its Result. Run as root: consumer ROOT [ATTESTATION].
//
// A program that links the library is the launcher of its own jobs, and the
// battery attestation binds the launcher's SHA-256: an attestation written
// for oarbank-agent proves nothing for this binary. So the job runs with
// RunOptions::unproven, and the result must say so; with ATTESTATION (one
// oarbank-conform wrote for the installed agent) the same job without the
// override must be refused, naming the launcher.
#include <oarbank/cage.h>

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace cage = oarbank::cage;

static int failures = 0;
static void Check(bool ok, const std::string& what, const cage::Result& r) {
  if (ok) return;
  ++failures;
  fprintf(stderr, "consumer: FAIL: %s (fault %s: %s; exit %d, signal %d; stdout [%s] stderr [%s])\n", what.c_str(),
          cage::FaultName(r.fault), r.reason.c_str(), r.exit_code, r.signal, r.stdout_text.c_str(),
          r.stderr_text.c_str());
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: consumer ROOT [ATTESTATION]\n");
    return 64;
  }
  namespace fs = std::filesystem;
  const fs::path root = fs::absolute(argv[1]);
  fs::create_directories(root / "worktree");
  fs::create_directories(root / "scratch");
  for (const auto& d : {root, root / "worktree", root / "scratch"}) chmod(d.c_str(), 0755);

  cage::Spec spec;
  spec.argv = {"/bin/sh", "-c",
               "echo hello from the cage; echo x > \"$HOME/written\" || exit 9; "
               "echo x > /worktree-escape 2>/dev/null && exit 10; exit 3"};
  spec.worktree = (root / "worktree").string();
  spec.scratch = (root / "scratch").string();

  cage::RunOptions options;
  options.unproven = true;
  const cage::Result r = cage::Run(spec, options);
  Check(r.fault == cage::Fault::kNone, "the job ran", r);
  Check(!r.refused(), "not refused", r);
  Check(r.exit_code == 3, "the job's own exit status (3)", r);
  Check(r.stdout_text == "hello from the cage\n", "its stdout", r);
  Check(r.container.proof == "unproven (operator override)", "the result says unproven (operator override)", r);
  Check(r.container.verified.no_new_privs == "1", "the gate read NoNewPrivs 1", r);
  Check(fs::exists(root / "scratch" / "written"), "scratch is writable", r);
  Check(!fs::exists("/worktree-escape"), "nothing written outside the grants", r);

  if (argc > 2) {
    cage::RunOptions proven;
    proven.attestation_path = argv[2];
    const cage::Result refused = cage::Run(spec, proven);
    Check(refused.fault == cage::Fault::kRefused && refused.refused(), "refused without the override", refused);
    Check(refused.reason.find("battery.proven") != std::string::npos, "the refusal names battery.proven", refused);
    Check(refused.reason.find("launcher") != std::string::npos, "the refusal names the launcher", refused);
    Check(refused.stdout_text.empty(), "nothing of a refused job ran", refused);
  }
  printf("consumer: %s (proof: %s)\n", failures == 0 ? "ok" : "FAILED", r.container.proof.c_str());
  return failures == 0 ? 0 : 1;
}
