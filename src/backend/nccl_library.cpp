// Opening NCCL at run time (backend/nccl_library.h): dlopen, one dlsym per function, the version check.
#include "backend/nccl_library.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "core/error.h"

namespace specserve::nccl {

namespace {

constexpr const char* kSoname = "libnccl.so.2";

std::string loader_error() {
  const char* e = dlerror();
  return e != nullptr ? std::string(e) : std::string("no reason given");
}

// The file the loader actually opened for `handle`, found through one of its symbols.
std::string opened_file(void* symbol, const std::string& fallback) {
  Dl_info info{};
  if (symbol != nullptr && dladdr(symbol, &info) != 0 && info.dli_fname != nullptr && info.dli_fname[0] != '\0')
    return info.dli_fname;
  return fallback;
}

struct Symbol {
  const char* name;
  void** slot;
};

}  // namespace

std::string nccl_version_text(int code) {
  if (code < 10000) return fmt::format("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100);
  return fmt::format("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100);
}

void check_nccl_version(int code, const std::string& path) {
  SS_CHECK(code >= kMinVersion, "NCCL {} is version {}; specserve needs {} or newer", path, nccl_version_text(code),
           nccl_version_text(kMinVersion));
}

std::string NcclLibrary::version_text() const { return nccl_version_text(version_); }

std::string NcclLibrary::describe(Result r, Comm comm) const {
  const char* text = api_.get_error_string != nullptr ? api_.get_error_string(r) : nullptr;
  std::string message = text != nullptr ? std::string(text) : fmt::format("result {}", static_cast<int>(r));
  const char* last = api_.get_last_error != nullptr ? api_.get_last_error(comm) : nullptr;
  if (last != nullptr && last[0] != '\0') message += fmt::format(": {}", last);
  return message;
}

void NcclLibrary::check(Result r, std::string_view what, Comm comm) const {
  if (r != kSuccess) fail("NCCL {} failed: {}", what, describe(r, comm));
}

std::shared_ptr<const NcclLibrary> load_nccl_library(const std::string& explicit_path) {
  const bool given = !explicit_path.empty();
  const std::string asked = given ? explicit_path : std::string(kSoname);
  dlerror();
  void* handle = dlopen(asked.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    if (given) fail("cannot load NCCL from --nccl-library {}: {}", explicit_path, loader_error());
    fail(
        "cannot load NCCL: the loader found no usable {} (it searched LD_LIBRARY_PATH, /etc/ld.so.cache, /lib and "
        "/usr/lib): {}. Install NCCL 2.18 or newer, or point --nccl-library (or LD_LIBRARY_PATH) at a copy, e.g. "
        "PyTorch's <site-packages>/nvidia/nccl/lib/libnccl.so.2",
        kSoname, loader_error());
  }
  auto lib = std::make_shared<NcclLibrary>();
  Api& a = lib->api_;
  const Symbol symbols[] = {
      {"ncclGetVersion", reinterpret_cast<void**>(&a.get_version)},
      {"ncclGetErrorString", reinterpret_cast<void**>(&a.get_error_string)},
      {"ncclGetLastError", reinterpret_cast<void**>(&a.get_last_error)},
      {"ncclGetUniqueId", reinterpret_cast<void**>(&a.get_unique_id)},
      {"ncclCommInitRank", reinterpret_cast<void**>(&a.comm_init_rank)},
      {"ncclCommInitAll", reinterpret_cast<void**>(&a.comm_init_all)},
      {"ncclCommDestroy", reinterpret_cast<void**>(&a.comm_destroy)},
      {"ncclCommAbort", reinterpret_cast<void**>(&a.comm_abort)},
      {"ncclCommGetAsyncError", reinterpret_cast<void**>(&a.comm_get_async_error)},
      {"ncclAllGather", reinterpret_cast<void**>(&a.all_gather)},
      {"ncclGroupStart", reinterpret_cast<void**>(&a.group_start)},
      {"ncclGroupEnd", reinterpret_cast<void**>(&a.group_end)},
  };
  std::vector<std::string> missing;
  for (const Symbol& s : symbols) {
    dlerror();
    *s.slot = dlsym(handle, s.name);
    if (*s.slot == nullptr) missing.emplace_back(s.name);
  }
  lib->path_ = opened_file(reinterpret_cast<void*>(a.get_version), asked);
  if (!missing.empty()) {
    dlclose(handle);
    fail("{} is not a usable NCCL: it lacks {} (NCCL {} or newer has every one)", asked, fmt::join(missing, ", "),
         nccl_version_text(kMinVersion));
  }
  int version = 0;
  const Result r = a.get_version(&version);
  if (r != kSuccess || version < kMinVersion) {
    dlclose(handle);
    SS_CHECK(r == kSuccess, "NCCL {}: ncclGetVersion failed (result {})", lib->path_, static_cast<int>(r));
    check_nccl_version(version, lib->path_);
  }
  lib->version_ = version;
  return lib;
}

std::shared_ptr<const NcclLibrary> nccl_library_from_api(const Api& api, std::string path, int version) {
  SS_CHECK(api.get_version && api.get_error_string && api.get_last_error && api.get_unique_id && api.comm_init_rank &&
               api.comm_init_all && api.comm_destroy && api.comm_abort && api.comm_get_async_error && api.all_gather &&
               api.group_start && api.group_end,
           "NCCL {}: every function of nccl::Api must be given", path);
  check_nccl_version(version, path);
  auto lib = std::make_shared<NcclLibrary>();
  lib->api_ = api;
  lib->path_ = std::move(path);
  lib->version_ = version;
  return lib;
}

}  // namespace specserve::nccl
