#pragma once
// Reading a request's stream to its end in tests: the one loop every collector shares.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "engine/result_stream.h"

namespace specserve::test {

// Calls on_event for every event of the stream up to and including the finishing one (a test failure
// when none comes for 120 s).
template <class OnEvent>
void drain(engine::ResultStream& s, OnEvent on_event) {
  std::vector<engine::StreamEvent> evs;
  for (;;) {
    evs.clear();
    if (!s.wait(evs, std::chrono::seconds(120))) {
      ADD_FAILURE() << "no output for 120 s";
      return;
    }
    for (const auto& e : evs) {
      on_event(e);
      if (e.finished) return;
    }
  }
}

}  // namespace specserve::test
