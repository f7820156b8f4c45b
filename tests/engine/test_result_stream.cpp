// ResultStream's consumer side: queued events are taken in order, and the ready hook fires once per
// push (the HTTP server's pump sleeps on it instead of polling) until it is cleared.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "engine/result_stream.h"

namespace specserve::engine {
namespace {

StreamEvent token_event(int32_t id, bool finished = false) {
  StreamEvent e;
  e.tokens = {id};
  e.finished = finished;
  return e;
}

TEST(ResultStream, ReadyHookFiresOncePerPushUntilCleared) {
  ResultStream stream;
  std::atomic<int> woken{0};
  stream.set_ready_hook([&] { woken.fetch_add(1); });
  stream.push(token_event(1));
  stream.push(token_event(2));
  EXPECT_EQ(woken.load(), 2);
  std::vector<StreamEvent> out;
  ASSERT_TRUE(stream.wait(out, std::chrono::milliseconds(0)));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].tokens, std::vector<int32_t>{1});
  EXPECT_EQ(out[1].tokens, std::vector<int32_t>{2});
  stream.set_ready_hook(nullptr);
  stream.push(token_event(3, /*finished=*/true));
  EXPECT_EQ(woken.load(), 2);
  EXPECT_TRUE(stream.finished());
}

TEST(ResultStream, AConsumerWokenByTheHookFindsTheEvent) {
  // The hook runs after the event is queued: a consumer woken by it never finds the queue empty.
  ResultStream stream;
  std::atomic<bool> found{false};
  stream.set_ready_hook([&] {
    std::vector<StreamEvent> out;
    found = stream.wait(out, std::chrono::milliseconds(0)) && out.size() == 1;
  });
  std::thread producer([&] { stream.push(token_event(7)); });
  producer.join();
  EXPECT_TRUE(found.load());
}

}  // namespace
}  // namespace specserve::engine
