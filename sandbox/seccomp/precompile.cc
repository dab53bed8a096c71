// seccomp_precompile OUT: the build step that compiles, with libseccomp,
// every row set the seccomp table can select (SeccompRowSets), for each
// architecture the filter is built for, with the table program of each
// (filter.h), and writes them as C++ data to OUT, which sandbox/seccomp/precompiled.cc
// includes. Any error (a row this libseccomp cannot compile) fails the build.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "sandbox/seccomp/filter.h"

namespace {

std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') {
      out += "\\n\"\n    \"";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A program as a C++ array named `name`.
std::string Array(const std::string& name, std::span<const sock_filter> program) {
  std::string out = "constexpr sock_filter " + name + "[] = {\n";
  char line[96];
  for (const sock_filter& f : program) {
    snprintf(line, sizeof line, "    {0x%04x, %u, %u, 0x%08x},\n", f.code, f.jt, f.jf, f.k);
    out += line;
  }
  return out + "};\n";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace oarbank;
  if (argc != 2) {
    fprintf(stderr, "usage: seccomp_precompile OUT.inc\n");
    return 64;
  }
  std::string out =
      "// Generated at build time by seccomp_precompile from the rows of sandbox/seccomp/rules.cc. Do not edit.\n\n";
  std::string entries;
  std::vector<std::pair<SeccompArch, std::vector<SeccompRule>>> sets;
  for (SeccompArch arch : kSeccompArches)
    for (auto& rows : SeccompRowSets(arch)) sets.emplace_back(arch, std::move(rows));
  for (size_t i = 0; i < sets.size(); ++i) {
    const auto& [arch, rows] = sets[i];
    auto program = CompileSeccomp(rows, arch);
    if (!program.ok()) {
      fprintf(stderr, "seccomp_precompile: %s: %s\n", program.error().where.c_str(), program.error().what.c_str());
      return 1;
    }
    const int highest = HighestSyscall(arch);
    auto table = MakeTableProgram(rows, arch, highest);
    if (!table.ok()) {
      fprintf(stderr, "seccomp_precompile: %s: %s\n", table.error().where.c_str(), table.error().what.c_str());
      return 1;
    }
    const std::string n = std::to_string(i);
    out += Array("kProgram" + n, program.value()) + Array("kTable" + n, table.value().span());
    out += "constexpr char kKey" + n + "[] =\n    " + Quoted(SeccompRowsKey(rows, arch)) + ";\n\n";
    entries += "    {kKey" + n + ", sizeof kKey" + n + " - 1, kProgram" + n + ", std::size(kProgram" + n + "), kTable" +
               n + ", std::size(kTable" + n + "), " + std::to_string(highest) + "},\n";
  }
  out += "constexpr PrecompiledEntry kPrecompiled[] = {\n" + entries + "};\n";
  const std::string tmp = std::string(argv[1]) + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (f == nullptr || fwrite(out.data(), 1, out.size(), f) != out.size() || fclose(f) != 0 ||
      rename(tmp.c_str(), argv[1]) != 0) {
    perror(argv[1]);
    return 1;
  }
  return 0;
}
