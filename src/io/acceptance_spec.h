#pragma once
// The acceptance profile of `specserve bench controlled` (cli/controlled_draft_proposer.h): how often
// a controlled draft is correct, given on the command line as
//   geometric:TAU          every draft is kept correct with one probability p, chosen so that the
//                          expected accepted run plus the bonus token is TAU tokens per verify
//   profile:P1,P2,...      draft i is correct with probability Pi given draft i−1 was (a measured
//                          per-position profile); drafts past the list are wrong
// and the arithmetic the bench and its tests need: the per-position probabilities for γ drafts and
// the mean and variance of the tokens one verify commits.
#include <string>
#include <string_view>
#include <vector>

namespace specserve {

struct AcceptanceSpec {
  enum class Kind { Geometric, Profile };
  Kind kind = Kind::Geometric;
  double tau = 0;               // Geometric: the requested tokens per verify (>= 1)
  std::vector<double> profile;  // Profile: P(draft i correct | draft i−1 correct), i = 1..n, in [0, 1]

  // P(draft i correct | draft i−1 correct) for i = 1..gamma. Throws Error when a geometric τ is more
  // than gamma + 1 (gamma drafts can never give it).
  std::vector<double> conditional(int gamma) const;
  // What the command line said, for every label: "geometric τ=6.5" or "profile 0.9,0.85".
  std::string label() const;
};

// Parses "geometric:TAU" or "profile:P1,P2,...". Throws Error naming the problem on anything else.
AcceptanceSpec parse_acceptance_spec(std::string_view text);

// The p with 1 + p + p² + … + p^gamma = tau (1 <= tau <= gamma + 1; Error otherwise).
double geometric_keep_probability(double tau, int gamma);

// Tokens one verify commits (accepted drafts + the bonus token) when drafts 1..n are correct with the
// conditional probabilities `conditional` (n = its size): mean and variance.
struct VerifyTokens {
  double mean = 1;
  double variance = 0;
};
VerifyTokens verify_tokens(const std::vector<double>& conditional);

}  // namespace specserve
