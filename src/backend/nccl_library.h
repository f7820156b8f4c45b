#pragma once
// NCCL, opened at run time (docs/DESIGN.md §6.5). specserve has no build-time NCCL dependency: the CPU-only
// build (CI: Debian packages only, no NCCL) compiles this file, and a CUDA build runs without NCCL until
// --tensor-parallel N > 1 asks for it. load_nccl_library() dlopen()s libnccl.so.2 and resolves the dozen
// functions the tensor-parallel collective calls (backend/nccl_communicators.h, backend/cuda/nccl_collective.h).
//
// Where it looks, in order: the explicit path (`--nccl-library PATH`, today on `specserve info --nccl`) when one
// is given, and then nowhere else; otherwise the dynamic loader's own search for the name libnccl.so.2
// (LD_LIBRARY_PATH, the binary's RUNPATH, /etc/ld.so.cache, /lib and /usr/lib). PyTorch's pip wheel ships one
// as <site-packages>/nvidia/nccl/lib/libnccl.so.2; CUDA's NCCL package as <cuda>/lib/libnccl.so.2.
//
// The types below are NCCL's C ABI, declared here rather than taken from nccl.h: an opaque communicator
// pointer, a 128-byte unique id passed by value, and int-sized enums whose values NCCL has kept since 2.0
// (the ones specserve uses are listed). The library must report version 2.18 or newer (ncclGetVersion), the
// oldest this code is written against. The library is never closed once loaded (NCCL keeps threads of its
// own); one that fails a check is.
//
//   auto lib = load_nccl_library("");          // throws Error: one line naming what was looked for
//   lib->check(lib->api().group_start(), "ncclGroupStart");
#include <memory>
#include <string>
#include <string_view>

namespace specserve::nccl {

using Comm = struct ncclComm*;  // ncclComm_t
using Stream = void*;           // cudaStream_t (a pointer), so this header needs no CUDA headers

struct UniqueId {  // ncclUniqueId
  char internal[128];
};

// ncclResult_t (the values specserve names; any other is reported through ncclGetErrorString).
enum Result : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
};

// ncclDataType_t (only the one specserve sends).
enum DataType : int { kFloat32 = 7 };

// The functions, by their NCCL names without the "nccl" prefix.
struct Api {
  Result (*get_version)(int* version) = nullptr;
  const char* (*get_error_string)(Result result) = nullptr;
  const char* (*get_last_error)(Comm comm) = nullptr;
  Result (*get_unique_id)(UniqueId* id) = nullptr;
  Result (*comm_init_rank)(Comm* comm, int nranks, UniqueId id, int rank) = nullptr;
  Result (*comm_init_all)(Comm* comms, int ndev, const int* devlist) = nullptr;
  Result (*comm_destroy)(Comm comm) = nullptr;
  Result (*comm_abort)(Comm comm) = nullptr;
  Result (*comm_get_async_error)(Comm comm, Result* async_error) = nullptr;
  Result (*all_gather)(const void* send, void* recv, size_t send_count, DataType type, Comm comm,
                       Stream stream) = nullptr;
  Result (*group_start)() = nullptr;
  Result (*group_end)() = nullptr;
};

// The oldest NCCL accepted, as ncclGetVersion encodes it (major * 10000 + minor * 100 + patch).
constexpr int kMinVersion = 21800;

class NcclLibrary {
 public:
  const Api& api() const { return api_; }
  // The file the loader opened (its absolute path where the loader says; else what was asked for).
  const std::string& path() const { return path_; }
  // ncclGetVersion's code, e.g. 22809, and as text, "2.28.9".
  int version() const { return version_; }
  std::string version_text() const;
  // "<NCCL's error string>[: <its last error message>]" for a result other than success.
  std::string describe(Result r, Comm comm = nullptr) const;
  // Throws Error "NCCL <what> failed: <describe(r, comm)>" unless r is success.
  void check(Result r, std::string_view what, Comm comm = nullptr) const;

 private:
  friend std::shared_ptr<const NcclLibrary> load_nccl_library(const std::string& explicit_path);
  friend std::shared_ptr<const NcclLibrary> nccl_library_from_api(const Api& api, std::string path, int version);
  Api api_;
  std::string path_;
  int version_ = 0;
};

// Opens NCCL (the search order above; explicit_path "" for the loader's default search), resolves every
// function of Api and checks the version. Throws Error with one line on failure: the file or name looked
// for and the loader's reason, every function the file lacks, or the version found and the one needed.
std::shared_ptr<const NcclLibrary> load_nccl_library(const std::string& explicit_path);

// A library from functions already at hand (tests use a fake NCCL; a binary that links NCCL could pass its
// own): every Api member must be set. Checks the version like load_nccl_library.
std::shared_ptr<const NcclLibrary> nccl_library_from_api(const Api& api, std::string path, int version);

// "2.28.9" from an ncclGetVersion code (both encodings: major * 1000 + minor * 100 + patch before 2.9).
std::string nccl_version_text(int code);
// Throws Error unless `code` is kMinVersion or newer; `path` names the library in the message.
void check_nccl_version(int code, const std::string& path);

}  // namespace specserve::nccl
