#pragma once
// Step costs in the engine's tests are written in milliseconds: 2.5 * kMs is 2.5 ms in seconds.
namespace specserve::engine {
inline constexpr double kMs = 1e-3;
}  // namespace specserve::engine
