#pragma once
// Reads a checkpoint's *.safetensors files once, front to back, so the page cache holds them
// before the model maps them. Loading a large model is dominated by this I/O; doing it here, in
// large sequential reads, gives the start-up progress bar a real byte count instead of a guess.
#include <cstdint>
#include <functional>
#include <string>

namespace specserve::server {

// Calls progress(bytes_read, bytes_total) as it goes. Returns the total size. Missing or
// unreadable files are left for the model loader to report.
uint64_t prefetch_weights(const std::string& dir, const std::function<void(uint64_t, uint64_t)>& progress);

}  // namespace specserve::server
