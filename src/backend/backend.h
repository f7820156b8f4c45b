#pragma once
// Backend selection by name: the op implementation and the memory its operands live in.
#include <string_view>

#include "backend/memory.h"
#include "backend/ops.h"

namespace specserve {

struct Backend {
  std::string_view name;         // "cpu" or "cuda"
  const Ops* ops = nullptr;
  const Memory* memory = nullptr;
};

// "cpu" or "cuda". Throws a one-line Error when the name is unknown, when this build has no CUDA
// backend, or when no CUDA device is usable.
Backend backend_named(std::string_view name);

}  // namespace specserve
