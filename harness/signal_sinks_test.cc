// SignalSinks (world.h): what judges a probe that says "sent". A signal sent
// to a sink must show as pending and replace the sink; a sink that is gone
// must be an error, never an empty (blocked-looking) pending set.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "harness/world.h"

namespace oarbank {
namespace {

class SignalSinksTest : public ::testing::TestWithParam<uid_t> {};

TEST_P(SignalSinksTest, NothingSentIsNothingPending) {
  SignalSinks sinks;
  const pid_t pid = sinks.For(GetParam());
  ASSERT_GT(pid, 0);
  const auto taken = sinks.TakePending(GetParam());
  ASSERT_TRUE(taken.ok()) << taken.error().what;
  EXPECT_EQ(taken.value(), 0u);
  EXPECT_EQ(sinks.For(GetParam()), pid) << "an untouched sink is kept";
}

TEST_P(SignalSinksTest, ASignalStaysPendingAndTheSinkIsReplaced) {
  SignalSinks sinks;
  const pid_t pid = sinks.For(GetParam());
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGIO), 0);  // blocked there: it neither runs nor kills
  const auto taken = sinks.TakePending(GetParam());
  ASSERT_TRUE(taken.ok()) << taken.error().what;
  EXPECT_EQ(taken.value(), 1ull << (SIGIO - 1));
  const pid_t next = sinks.For(GetParam());
  EXPECT_GT(next, 0);
  EXPECT_NE(next, pid);
  const auto again = sinks.TakePending(GetParam());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value(), 0u) << "the replacement starts with nothing pending";
}

TEST_P(SignalSinksTest, AGoneSinkIsAnErrorNotNothingPending) {
  SignalSinks sinks;
  const pid_t pid = sinks.For(GetParam());
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);  // dead, not reaped
  const auto taken = sinks.TakePending(GetParam());
  ASSERT_FALSE(taken.ok());
  EXPECT_NE(taken.error().what.find("not a live process"), std::string::npos) << taken.error().what;
}

INSTANTIATE_TEST_SUITE_P(AsRootAndNobody, SignalSinksTest, ::testing::Values(uid_t{0}, uid_t{65534}),
                         [](const auto& info) {
                           return info.param == 0 ? std::string("root") : std::string("nobody");
                         });

}  // namespace
}  // namespace oarbank
