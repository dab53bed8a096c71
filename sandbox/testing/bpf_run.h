// Runs a classic BPF seccomp program over a seccomp_data in the test
// process, the way the kernel would: so a test can judge a filter of an
// architecture it does not run on (the aarch64 programs on an x86_64 host),
// and any number of syscall numbers without making the calls. It takes the
// instructions seccomp filters may use (the kernel's seccomp_check_filter);
// anything else is an error, never a guess.
#pragma once

#include <linux/filter.h>
#include <linux/seccomp.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

namespace oarbank::testing {

// The program's answer for `data`, or nullopt for a program the kernel
// would refuse (a bad instruction, a read past seccomp_data, a jump out).
inline std::optional<uint32_t> RunSeccompBpf(std::span<const sock_filter> program, const seccomp_data& data) {
  uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {};
  unsigned char bytes[sizeof(seccomp_data)];
  memcpy(bytes, &data, sizeof data);
  for (size_t pc = 0; pc < program.size(); ++pc) {
    const sock_filter& f = program[pc];
    const uint32_t src = BPF_SRC(f.code) == BPF_X ? x : f.k;
    switch (BPF_CLASS(f.code)) {
      case BPF_LD:
      case BPF_LDX: {
        uint32_t v = 0;
        switch (BPF_MODE(f.code)) {
          case BPF_ABS:
            if (BPF_SIZE(f.code) != BPF_W || f.k % 4 != 0 || f.k + 4 > sizeof data) return std::nullopt;
            memcpy(&v, bytes + f.k, 4);
            break;
          case BPF_IMM: v = f.k; break;
          case BPF_MEM:
            if (f.k >= BPF_MEMWORDS) return std::nullopt;
            v = mem[f.k];
            break;
          case BPF_LEN: v = sizeof data; break;
          default: return std::nullopt;
        }
        (BPF_CLASS(f.code) == BPF_LD ? a : x) = v;
        break;
      }
      case BPF_ST:
      case BPF_STX:
        if (f.k >= BPF_MEMWORDS) return std::nullopt;
        mem[f.k] = BPF_CLASS(f.code) == BPF_ST ? a : x;
        break;
      case BPF_ALU:
        switch (BPF_OP(f.code)) {
          case BPF_ADD: a += src; break;
          case BPF_SUB: a -= src; break;
          case BPF_MUL: a *= src; break;
          case BPF_DIV:
            if (src == 0) return 0u;  // the kernel's answer: the filter returns 0 (kill)
            a /= src;
            break;
          case BPF_AND: a &= src; break;
          case BPF_OR: a |= src; break;
          case BPF_XOR: a ^= src; break;
          case BPF_LSH: a = src < 32 ? a << src : 0; break;
          case BPF_RSH: a = src < 32 ? a >> src : 0; break;
          case BPF_NEG: a = -a; break;
          default: return std::nullopt;
        }
        break;
      case BPF_JMP: {
        size_t jump = 0;
        if (BPF_OP(f.code) == BPF_JA) {
          jump = f.k;
        } else {
          bool taken = false;
          switch (BPF_OP(f.code)) {
            case BPF_JEQ: taken = a == src; break;
            case BPF_JGT: taken = a > src; break;
            case BPF_JGE: taken = a >= src; break;
            case BPF_JSET: taken = (a & src) != 0; break;
            default: return std::nullopt;
          }
          jump = taken ? f.jt : f.jf;
        }
        if (pc + 1 + jump >= program.size()) return std::nullopt;
        pc += jump;
        break;
      }
      case BPF_RET: return BPF_RVAL(f.code) == BPF_A ? a : f.k;
      case BPF_MISC:
        if (BPF_MISCOP(f.code) == BPF_TAX)
          x = a;
        else
          a = x;
        break;
      default: return std::nullopt;
    }
  }
  return std::nullopt;  // fell off the end
}

// The kernel's answer when every filter of `programs` has run: the most
// restrictive action wins (kill, trap, errno, user notification, trace,
// log, allow); among equals, the first program's (the most recently loaded).
inline std::optional<uint32_t> RunSeccompFilters(std::initializer_list<std::span<const sock_filter>> programs,
                                                 const seccomp_data& data) {
  std::optional<uint32_t> best;
  for (auto program : programs) {
    const auto ret = RunSeccompBpf(program, data);
    if (!ret) return std::nullopt;
    // SECCOMP_RET_ACTION_FULL compared as signed: KILL_PROCESS (0x80000000) is the lowest.
    auto rank = [](uint32_t r) { return static_cast<int32_t>(r & SECCOMP_RET_ACTION_FULL); };
    if (!best || rank(*ret) < rank(*best)) best = ret;
  }
  return best;
}

}  // namespace oarbank::testing
