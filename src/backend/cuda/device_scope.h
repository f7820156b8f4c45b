#pragma once
// The CUDA backend's per-device state (docs/DESIGN.md §6.5). One process may drive several GPUs (tensor
// parallelism, one rank a GPU): the stream, the launch recorder and its staging, the caching allocator and
// the kernels' shared-memory attributes are each the current device's. `current_device()` is the calling
// thread's current device as DeviceScope leaves it (cached per thread: the backend's launch paths read it
// for every launch, and cudaGetDevice is a runtime call); code that changes the device goes through
// DeviceScope, never cudaSetDevice itself, so the cache stays true (a library call that may change it, such
// as ncclCommInitAll, is followed by cudaSetDevice(current_device())). Every GPU a process drives must be the
// same model: device properties read once (the multiprocessor count, shared memory per multiprocessor)
// are the first device's.
#include <array>
#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>

namespace specserve::cuda {

inline constexpr int kMaxDevices = 16;

// The calling thread's current device (0 .. kMaxDevices - 1).
int current_device();

// Makes `device` current and returns the previous device, or -1 when it already was (nothing to restore);
// restore_current(previous) undoes it (a no-op for -1). DeviceScope is the scoped form; a Memory's
// enter_device / leave_device (backend/memory.h) are these.
int make_current(int device);
void restore_current(int previous) noexcept;

// Makes `device` current for its scope (cudaSetDevice, only when it is not already) and restores the
// previous device after.
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;  // -1: unchanged
};

// Runs a configuration once per device, with that device current (cudaFuncSetAttribute is an attribute of
// the device's context):
//   static OncePerDevice configured;
//   configured([] { CUDA_CHECK(cudaFuncSetAttribute(kernel, ...)); });
class OncePerDevice {
 public:
  template <class F>
  void operator()(F&& configure) {
    std::call_once(flags_[static_cast<size_t>(current_device())], std::forward<F>(configure));
  }

 private:
  std::array<std::once_flag, kMaxDevices> flags_;
};

// One T per device, made by `make(device)` on that device's first use with it current. Never destroyed:
// the backend's state outlives static destructors that may still use it, and the driver reclaims it at exit.
template <class T>
class PerDevice {
 public:
  template <class Make>
  T& get(int device, Make make) {
    std::call_once(made_[static_cast<size_t>(device)], [&] {
      DeviceScope scope(device);
      items_[static_cast<size_t>(device)] = make(device);
    });
    return *items_[static_cast<size_t>(device)];
  }

 private:
  std::array<std::once_flag, kMaxDevices> made_;
  std::array<T*, kMaxDevices> items_{};
};

}  // namespace specserve::cuda
