// SHA-256 (nettle, through sha256.h) against the FIPS 180-2 example vectors (one block, two blocks,
// a million 'a'), every padding boundary, and coreutils' sha256sum (an
// independent implementation) on random inputs.
#include "sandbox/common/sha256.h"

#include <stdio.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

namespace oarbank {
namespace {

TEST(Sha256, FipsVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

std::string Sha256Sum(const std::string& data) {
  char path[] = "/tmp/oarbank-manifest-sha-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "mkstemp failed";
  close(fd);
  std::ofstream(path, std::ios::binary) << data;
  FILE* p = popen(("sha256sum " + std::string(path)).c_str(), "r");
  char out[65] = {};
  const size_t n = p ? fread(out, 1, 64, p) : 0;
  if (p) pclose(p);
  unlink(path);
  return n == 64 ? std::string(out, 64) : "sha256sum failed";
}

TEST(Sha256, EveryPaddingBoundaryMatchesSha256sum) {
  for (size_t len : {55u, 56u, 57u, 63u, 64u, 65u, 119u, 120u, 127u, 128u, 129u})
    EXPECT_EQ(Sha256Hex(std::string(len, 'x')), Sha256Sum(std::string(len, 'x'))) << len;
}

TEST(Sha256, OfAFileMatchesSha256sum) {
  std::string data;
  for (uint32_t i = 0; i < 300000; ++i) data.push_back(static_cast<char>(i * 7919u % 251u));
  char path[] = "/tmp/oarbank-sha-fd-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  lseek(fd, 0, SEEK_SET);
  EXPECT_EQ(Sha256HexOfFd(fd).value_or(""), Sha256Sum(data));
  EXPECT_EQ(Sha256HexOfFd(-1), std::nullopt);
  close(fd);
  unlink(path);
}

RC_GTEST_PROP(Sha256, MatchesSha256sumOnRandomInput, (const std::string& data)) {
  RC_ASSERT(Sha256Hex(data) == Sha256Sum(data));
}

}  // namespace
}  // namespace oarbank
