// The serve-load workloads against `specserve serve` on the default model (a hybrid target: the prefix
// cache needs its DeltaNet state snapshots): multi-turn conversations hit the cache from their second
// turn, and the hit counts of usage.prompt_tokens_details.cached_tokens and of /metrics agree.
#include <gtest/gtest.h>

#include "server/load_generator.h"
#include "server_process.h"

using namespace specserve;
using namespace specserve::server;

TEST(LoadWorkloadsE2E, MultiTurnFollowUpsHitThePrefixCache) {
  test::ServerProcess server(test::default_model_dir(), {"--threads", "2"});
  LoadGeneratorOptions o;
  o.port = server.port();
  o.model = server.model();
  o.workload = Workload::MultiTurn;
  o.conversations = 2;
  o.turns = 3;
  // At least 300 tokens: each turn's prompt has its last 64-position grid point at 256 or past it, where
  // the engine keeps the state (only there, not under 256), so the next turn resumes there.
  o.prompt_words = 300;
  o.turn_words = 20;
  o.max_tokens = 6;
  o.level_salt = 5;
  LevelResult r = run_load_level(o, 2);
  EXPECT_EQ(r.requests, 6);
  EXPECT_EQ(r.errors, 0) << r.first_error;
  EXPECT_EQ(r.followups, 4);
  EXPECT_GT(r.cached_tokens, 0);
  EXPECT_EQ(r.cache_hits, static_cast<double>(r.cached_tokens));
  EXPECT_EQ(r.cache_queries, static_cast<double>(r.prompt_tokens));  // every prompt token is looked up
  // A fresh level shares nothing with the first but the chat template's opening (at most one block).
  LoadGeneratorOptions fresh = o;
  fresh.level_salt = 6;
  fresh.turns = 1;
  LevelResult cold = run_load_level(fresh, 2);
  EXPECT_EQ(cold.errors, 0) << cold.first_error;
  EXPECT_LE(cold.cached_tokens, 2 * 16);
  double took_s = 0;
  EXPECT_EQ(server.terminate_within(10, &took_s), 0);
}
