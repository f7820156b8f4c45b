#pragma once
// Backend selection by name: the op implementation and the memory its operands live in.
#include <string_view>

#include "backend/memory.h"
#include "backend/ops.h"

namespace specserve {

struct Backend {
  std::string_view name;  // "cpu" or "cuda"
  const Ops* ops = nullptr;
  const Memory* memory = nullptr;
  // Where tensor-parallel ranks go (docs/DESIGN.md §6.5): `devices` places (on CUDA the GPUs; on the CPU as many
  // host ranks as tensor parallelism takes) and the memory of place d (`memory` is place 0's). The ops run on
  // the current device, which a MemoryDeviceScope of the place's memory sets.
  int devices = 1;
  const Memory& (*device_memory)(int device) = nullptr;
};

// "cpu", "cuda", or "auto" (cuda when this build has it and a device is usable, else cpu). Throws a
// one-line Error when the name is unknown, or for "cuda" when this build has no CUDA backend or no
// CUDA device is usable.
Backend backend_named(std::string_view name);
// True when this build has the CUDA backend and a device is usable.
bool cuda_device_present();

}  // namespace specserve
