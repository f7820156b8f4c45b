// NCCL opened at run time (backend/nccl_library.h) and the communicators of one process
// (backend/nccl_communicators.h): the loader's one-line errors, the version check, and — with a fake NCCL —
// the argument checks, NVLink multicast off before init, grouped calls, and abort on a failure.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "backend/nccl_communicators.h"
#include "backend/nccl_library.h"
#include "core/error.h"

namespace specserve::nccl {
namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(NcclLibrary, AMissingExplicitPathIsNamedOnOneLine) {
  const std::string path = "/nonexistent/specserve-test/libnccl.so.2";
  const std::string e = error_of([&] { load_nccl_library(path); });
  EXPECT_NE(e.find("--nccl-library " + path), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(NcclLibrary, ALibraryWithoutNcclNamesEveryMissingFunction) {
  // libm is on every glibc system and has none of NCCL's functions.
  const std::string e = error_of([] { load_nccl_library("libm.so.6"); });
  for (const char* name : {"libm.so.6", "ncclGetVersion", "ncclCommInitAll", "ncclAllGather", "ncclGroupEnd"})
    EXPECT_NE(e.find(name), std::string::npos) << name << " not in: " << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(NcclLibrary, VersionCodesAndTheOldestAccepted) {
  EXPECT_EQ(nccl_version_text(22809), "2.28.9");
  EXPECT_EQ(nccl_version_text(21800), "2.18.0");
  EXPECT_EQ(nccl_version_text(2708), "2.7.8");  // the encoding before 2.9
  EXPECT_NO_THROW(check_nccl_version(21800, "x"));
  const std::string e = error_of([] { check_nccl_version(21703, "/opt/libnccl.so.2"); });
  EXPECT_NE(e.find("/opt/libnccl.so.2 is version 2.17.3"), std::string::npos) << e;
  EXPECT_NE(e.find("2.18.0 or newer"), std::string::npos) << e;
  EXPECT_THROW(check_nccl_version(2708, "x"), Error);
}

// Where the machine has NCCL (a CUDA install or LD_LIBRARY_PATH), the default search loads it; where it has
// none (CI), the error says what was looked for and where.
TEST(NcclLibrary, TheDefaultSearchLoadsNcclOrSaysWhatItLookedFor) {
  std::shared_ptr<const NcclLibrary> lib;
  try {
    lib = load_nccl_library("");
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("libnccl.so.2"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    GTEST_SKIP() << m;
  }
  EXPECT_GE(lib->version(), kMinVersion);
  EXPECT_FALSE(lib->path().empty());
  EXPECT_NO_THROW(lib->check(kSuccess, "ncclGroupStart"));
  const std::string e = error_of([&] { lib->check(kInvalidUsage, "ncclAllGather"); });
  EXPECT_EQ(e.rfind("NCCL ncclAllGather failed: ", 0), 0u) << e;
  EXPECT_GT(e.size(), std::string("NCCL ncclAllGather failed: ").size()) << e;
}

// ---- a fake NCCL: two or more "devices", results chosen by the test ----------------------------------------

struct FakeState {
  int comms_made = 0, destroyed = 0, aborted = 0, gathers = 0, groups_open = 0;
  Result init_result = kSuccess, gather_result = kSuccess, async_result = kSuccess;
  std::string nvls_at_init;
};
FakeState fake;
// Fake communicators are addresses inside this array (never dereferenced).
char comm_storage[16];

Result fake_get_version(int* v) {
  *v = 22809;
  return kSuccess;
}
const char* fake_error_string(Result r) { return r == kSuccess ? "no error" : "fake failure"; }
const char* fake_last_error(Comm) { return "detail from the fake"; }
Result fake_unique_id(UniqueId*) { return kSuccess; }
Result fake_init_rank(Comm*, int, UniqueId, int) { return kInternalError; }
Result fake_init_all(Comm* comms, int n, const int*) {
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  fake.nvls_at_init = nvls != nullptr ? nvls : "(unset)";
  if (fake.init_result != kSuccess) return fake.init_result;
  for (int i = 0; i < n; ++i) comms[i] = reinterpret_cast<Comm>(&comm_storage[i]);
  fake.comms_made += n;
  return kSuccess;
}
Result fake_destroy(Comm) {
  ++fake.destroyed;
  return kSuccess;
}
Result fake_abort(Comm) {
  ++fake.aborted;
  return kSuccess;
}
Result fake_async(Comm, Result* r) {
  *r = fake.async_result;
  return kSuccess;
}
Result fake_all_gather(const void*, void*, size_t, DataType, Comm, Stream) {
  ++fake.gathers;
  return fake.gather_result;
}
Result fake_group_start() {
  ++fake.groups_open;
  return kSuccess;
}
Result fake_group_end() {
  --fake.groups_open;
  return kSuccess;
}

std::shared_ptr<const NcclLibrary> fake_nccl() {
  fake = FakeState{};
  Api a;
  a.get_version = fake_get_version;
  a.get_error_string = fake_error_string;
  a.get_last_error = fake_last_error;
  a.get_unique_id = fake_unique_id;
  a.comm_init_rank = fake_init_rank;
  a.comm_init_all = fake_init_all;
  a.comm_destroy = fake_destroy;
  a.comm_abort = fake_abort;
  a.comm_get_async_error = fake_async;
  a.all_gather = fake_all_gather;
  a.group_start = fake_group_start;
  a.group_end = fake_group_end;
  return nccl_library_from_api(a, "fake-nccl", 22809);
}

Result gather_on(const NcclCommunicators& c, int r) {
  return c.library().api().all_gather(nullptr, nullptr, 1, kFloat32, c.comm(r), nullptr);
}

TEST(NcclCommunicators, RefusesNoDevicesAndADeviceListedTwice) {
  auto lib = fake_nccl();
  EXPECT_NE(error_of([&] { NcclCommunicators c(lib, {}); }).find("at least one CUDA device"), std::string::npos);
  const std::string twice = error_of([&] { NcclCommunicators c(lib, {0, 1, 0}); });
  EXPECT_NE(twice.find("CUDA device 0 is listed for ranks 0 and 2"), std::string::npos) << twice;
  EXPECT_NE(error_of([&] { NcclCommunicators c(lib, {-1}); }).find("not a device index"), std::string::npos);
  EXPECT_EQ(fake.comms_made, 0);
  Api incomplete = lib->api();
  incomplete.all_gather = nullptr;
  EXPECT_THROW(nccl_library_from_api(incomplete, "partial", 22809), Error);
  EXPECT_THROW(nccl_library_from_api(lib->api(), "old", 21703), Error);
}

TEST(NcclCommunicators, SwitchesNvlinkMulticastOffBeforeInitAndDestroysAtTheEnd) {
  auto lib = fake_nccl();
  setenv("NCCL_NVLS_ENABLE", "1", 1);
  {
    NcclCommunicators c(lib, {0, 1});
    EXPECT_EQ(fake.nvls_at_init, "0");
    EXPECT_EQ(c.ranks(), 2);
    EXPECT_EQ(c.device(1), 1);
    c.group("ncclAllGather", [&](int r) { return gather_on(c, r); });
    EXPECT_EQ(fake.gathers, 2);
    EXPECT_EQ(fake.groups_open, 0);
  }
  EXPECT_EQ(fake.destroyed, 2);
  EXPECT_EQ(fake.aborted, 0);
}

TEST(NcclCommunicators, AFailedInitNamesTheDevicesAndNcclsMessage) {
  auto lib = fake_nccl();
  fake.init_result = kUnhandledCudaError;
  const std::string e = error_of([&] { NcclCommunicators c(lib, {0, 1}); });
  EXPECT_NE(e.find("ncclCommInitAll over CUDA devices 0, 1 failed: fake failure: detail from the fake"),
            std::string::npos)
      << e;
  EXPECT_EQ(fake.destroyed, 0);
}

TEST(NcclCommunicators, AFailedCallAbortsEveryRankAndLaterUseIsRefused) {
  auto lib = fake_nccl();
  {
    NcclCommunicators c(lib, {0, 1, 2});
    fake.gather_result = kRemoteError;
    const std::string e = error_of([&] { c.group("ncclAllGather", [&](int r) { return gather_on(c, r); }); });
    EXPECT_NE(e.find("NCCL ncclAllGather on rank 0 (CUDA device 0) failed: fake failure"), std::string::npos) << e;
    EXPECT_NE(e.find("aborted"), std::string::npos) << e;
    EXPECT_EQ(fake.groups_open, 0) << "the group was closed";
    EXPECT_EQ(fake.gathers, 1) << "no rank enqueued after the failure";
    EXPECT_EQ(fake.aborted, 3);
    EXPECT_TRUE(c.aborted());
    fake.gather_result = kSuccess;
    EXPECT_NE(error_of([&] { c.check_async(); }).find("aborted after an earlier error"), std::string::npos);
  }
  EXPECT_EQ(fake.destroyed, 0) << "aborted communicators are not destroyed again";
}

TEST(NcclCommunicators, AnAsynchronousErrorAbortsEveryRank) {
  auto lib = fake_nccl();
  NcclCommunicators c(lib, {3, 5});
  EXPECT_NO_THROW(c.check_async());
  fake.async_result = kInProgress;  // not an error for a communicator still settling
  EXPECT_NO_THROW(c.check_async());
  fake.async_result = kSystemError;
  const std::string e = error_of([&] { c.group("ncclAllGather", [&](int r) { return gather_on(c, r); }); });
  EXPECT_NE(e.find("NCCL rank 0 (CUDA device 3) reported an error: fake failure"), std::string::npos) << e;
  EXPECT_EQ(fake.gathers, 0);
  EXPECT_EQ(fake.aborted, 2);
}

}  // namespace
}  // namespace specserve::nccl
