#include "sandbox/common/text_encoding.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace oarbank {
namespace {

TEST(TextEncodingTest, Utf8IsCheckedStrictly) {
  EXPECT_TRUE(IsUtf8(""));
  EXPECT_TRUE(IsUtf8("plain ascii\n"));
  EXPECT_TRUE(IsUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_TRUE(IsUtf8("\xf4\x8f\xbf\xbf"));  // U+10FFFF
  EXPECT_FALSE(
      IsUtf8("a\xff"
             "b"));              // never a UTF-8 byte
  EXPECT_FALSE(IsUtf8("\xc3"));  // a character cut by a cap
  EXPECT_FALSE(IsUtf8("\xe2\x82"));
  EXPECT_FALSE(IsUtf8("\xc0\xaf"));  // overlong '/'
  EXPECT_FALSE(IsUtf8("\xe0\x80\xaf"));
  EXPECT_FALSE(IsUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(IsUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsUtf8("\x80"));              // a continuation byte alone
  EXPECT_FALSE(IsUtf8(std::string("\xc3\x00", 2)));
}

TEST(TextEncodingTest, Base64MatchesRfc4648) {
  EXPECT_EQ(Base64(""), "");
  EXPECT_EQ(Base64("f"), "Zg==");
  EXPECT_EQ(Base64("fo"), "Zm8=");
  EXPECT_EQ(Base64("foo"), "Zm9v");
  EXPECT_EQ(Base64("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64("a\xff"
                   "b\n"),
            "Yf9iCg==");
}

// Decoding what Base64 made gives back every byte.
RC_GTEST_PROP(TextEncodingProperty, Base64RoundTrips, (const std::string& bytes)) {
  const std::string encoded = Base64(bytes);
  RC_ASSERT(encoded.size() == (bytes.size() + 2) / 3 * 4);
  std::string decoded;
  uint32_t bits = 0;
  int have = 0;
  for (char c : encoded) {
    if (c == '=') break;
    const int v = c >= 'A' && c <= 'Z'   ? c - 'A'
                  : c >= 'a' && c <= 'z' ? c - 'a' + 26
                  : c >= '0' && c <= '9' ? c - '0' + 52
                  : c == '+'             ? 62
                                         : 63;
    bits = (bits << 6) | static_cast<uint32_t>(v);
    have += 6;
    if (have >= 8) {
      have -= 8;
      decoded += static_cast<char>((bits >> have) & 0xff);
    }
  }
  RC_ASSERT(decoded == bytes);
}

}  // namespace
}  // namespace oarbank
