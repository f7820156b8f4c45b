#pragma once
// Helpers for the io tests: a scratch directory per test, raw file writers for building malformed
// inputs byte by byte, and an assertion that a call fails with a one-line specserve::Error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "core/error.h"

namespace specserve::test {

// The checkpoints transformers saved (tools/reference/model/make_fixtures.py), one folder each.
inline const std::string kModelFixtures = std::string(SPECSERVE_SOURCE_DIR) + "/tests/fixtures/model/";

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    static int counter = 0;  // several TempDirs in one test get different names
    std::string name = std::string("specserve-io-") + (info ? info->test_suite_name() : "x") + "-" +
                       (info ? info->name() : "x") + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The 8-byte little-endian length prefix of a safetensors file.
inline std::string length_prefix(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A safetensors image with exactly this header text and these data bytes.
inline std::string safetensors_bytes(const std::string& header, const std::string& data) {
  return length_prefix(header.size()) + header + data;
}

// Runs fn and checks that it throws specserve::Error whose message contains `needle` and is one
// line. Returns the message (empty when the check failed) so callers can check more.
inline std::string expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << "message: " << msg << "\nexpected to contain: " << needle;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
    return msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-specserve exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not throw; expected an error containing: " << needle;
  return "";
}

}  // namespace specserve::test
