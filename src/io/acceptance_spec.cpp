#include "io/acceptance_spec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace specserve {

namespace {

constexpr size_t kMaxProfileEntries = 256;
constexpr const char* kForms = "give geometric:TAU (TAU >= 1) or profile:P1,P2,... (each in [0, 1])";

double parse_number(std::string_view text, std::string_view what) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  SS_CHECK(!text.empty() && ec == std::errc() && ptr == end && std::isfinite(v),
           "--acceptance: {} '{}' is not a number; {}", what, std::string(text), kForms);
  return v;
}

std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

AcceptanceSpec parse_acceptance_spec(std::string_view text) {
  const size_t colon = text.find(':');
  SS_CHECK(colon != std::string_view::npos, "--acceptance: '{}' has no kind; {}", std::string(text), kForms);
  const std::string_view kind = text.substr(0, colon);
  const std::string_view rest = text.substr(colon + 1);
  AcceptanceSpec spec;
  if (kind == "geometric") {
    spec.kind = AcceptanceSpec::Kind::Geometric;
    spec.tau = parse_number(rest, "τ");
    SS_CHECK(spec.tau >= 1, "--acceptance: τ is tokens per verify and at least 1 (the bonus token), got {}",
             short_number(spec.tau));
    return spec;
  }
  SS_CHECK(kind == "profile", "--acceptance: unknown kind '{}'; {}", std::string(kind), kForms);
  spec.kind = AcceptanceSpec::Kind::Profile;
  size_t start = 0;
  while (true) {
    const size_t comma = rest.find(',', start);
    const std::string_view item = rest.substr(start, comma == std::string_view::npos ? rest.npos : comma - start);
    const double p = parse_number(item, "probability");
    SS_CHECK(p >= 0 && p <= 1, "--acceptance: probability {} is outside [0, 1]", short_number(p));
    spec.profile.push_back(p);
    SS_CHECK(spec.profile.size() <= kMaxProfileEntries, "--acceptance: a profile has at most {} entries",
             kMaxProfileEntries);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return spec;
}

std::vector<double> AcceptanceSpec::conditional(int gamma) const {
  SS_CHECK(gamma >= 0, "acceptance: gamma {} is negative", gamma);
  if (kind == Kind::Geometric)
    return std::vector<double>(static_cast<size_t>(gamma), geometric_keep_probability(tau, gamma));
  std::vector<double> c(profile.begin(), profile.begin() + std::min<size_t>(profile.size(), gamma));
  c.resize(static_cast<size_t>(gamma), 0.0);
  return c;
}

std::string AcceptanceSpec::label() const {
  if (kind == Kind::Geometric) return "geometric τ=" + short_number(tau);
  std::string s = "profile ";
  for (size_t i = 0; i < profile.size(); ++i) s += (i ? "," : "") + short_number(profile[i]);
  return s;
}

double geometric_keep_probability(double tau, int gamma) {
  SS_CHECK(tau >= 1 && tau <= gamma + 1.0,
           "--acceptance: geometric τ={} needs 1 <= τ <= γ + 1 = {} (γ drafts and the bonus token)", short_number(tau),
           gamma + 1);
  if (tau == 1) return 0;  // every draft wrong, exactly
  if (tau == gamma + 1.0) return 1;
  auto expected = [gamma](double p) {
    double sum = 1, pk = 1;
    for (int k = 1; k <= gamma; ++k) sum += (pk *= p);
    return sum;
  };
  double lo = 0, hi = 1;  // expected() rises with p from 1 to gamma + 1
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    (expected(mid) < tau ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

VerifyTokens verify_tokens(const std::vector<double>& conditional) {
  // A = accepted drafts: P(A >= k) = S_k = c_1 ... c_k, E[A] = Σ S_k, E[A²] = Σ (2k − 1) S_k.
  double s = 1, mean = 0, second = 0;
  for (size_t k = 1; k <= conditional.size(); ++k) {
    s *= conditional[k - 1];
    mean += s;
    second += (2.0 * static_cast<double>(k) - 1) * s;
  }
  return {1 + mean, second - mean * mean};
}

}  // namespace specserve
