// The one registry of environment variables (core/env_registry.h): a handful of entries, each documented,
// and no read of a SPECSERVE_ variable anywhere in src/ that bypasses it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "core/env_registry.h"
#include "core/error.h"

using namespace specserve;
namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Macros of the build (CMake definitions), which share the prefix but are not environment variables.
const std::set<std::string> kBuildMacros = {"SPECSERVE_HAVE_CUDA", "SPECSERVE_DEBUG_CHECKS", "SPECSERVE_FUZZ_BUILD",
                                            "SPECSERVE_SOURCE_DIR", "SPECSERVE_BINARY_DIR"};

}  // namespace

// Off-switches and debugging aids only (a user's choice is a flag): a handful. Session 25 added the ninth,
// the engine's step trace; a tenth should replace one rather than join them.
TEST(EnvRegistry, AHandfulOfDocumentedVariables) {
  const auto reg = env_registry();
  EXPECT_GE(reg.size(), 1u);
  EXPECT_LE(reg.size(), 9u);
  std::set<std::string_view> names;
  for (const EnvVar& e : reg) {
    EXPECT_TRUE(e.name.starts_with("SPECSERVE_")) << e.name;
    EXPECT_TRUE(names.insert(e.name).second) << "twice: " << e.name;
    EXPECT_GE(e.meaning.size(), 20u) << e.name << " has no meaning worth the name";
    if (e.type == EnvType::Int) {
      EXPECT_NO_THROW(env_int(e.name)) << e.name;  // the fallback (or the value set) is an integer
    }
  }
}

TEST(EnvRegistry, AnUnregisteredNameFails) {
  EXPECT_THROW(env_text("SPECSERVE_NOT_A_VARIABLE"), Error);
  EXPECT_THROW(env_switch("SPECSERVE_TC_WGMMA"), Error);
}

TEST(EnvRegistry, TheTableListsEveryVariable) {
  const std::string table = format_env_registry();
  for (const EnvVar& e : env_registry()) {
    EXPECT_NE(table.find(std::string(e.name)), std::string::npos) << e.name;
    EXPECT_NE(table.find(std::string(e.meaning)), std::string::npos) << e.name;
  }
}

TEST(EnvRegistry, IntegersParseStrictly) {
  EXPECT_EQ(parse_env_int("X", "4000"), 4000);
  EXPECT_EQ(parse_env_int("X", "-3"), -3);
  for (const char* bad : {"", " 1", "1 ", "12x", "0x10", "1e3", "99999999999999999999", "+"}) {
    EXPECT_THROW(parse_env_int("X", bad), Error) << bad;
  }
}

// A secret's value never reaches the table.
TEST(EnvRegistry, SecretsAreNotPrinted) {
  const std::string table = format_env_registry();
  for (const EnvVar& e : env_registry())
    if (e.secret && !env_text(e.name).empty()) {
      EXPECT_EQ(table.find(std::string(env_text(e.name))), std::string::npos) << e.name;
    }
}

TEST(EnvRegistry, SwitchesAreOffOnlyWhenSaidSo) {
  for (const EnvVar& e : env_registry())
    if (e.type == EnvType::Switch) {
      const std::string_view v = env_text(e.name);
      EXPECT_EQ(env_switch(e.name), !(v == "0" || v == "off" || v == "false" || v == "no")) << e.name;
    }
}

// Every SPECSERVE_ name src/ mentions is registered (or a build macro), and only the registry calls getenv
// for one: a knob cannot come back through a side door.
TEST(EnvRegistry, SourcesReadNoVariableOutsideIt) {
  std::set<std::string> registered;
  for (const EnvVar& e : env_registry()) registered.insert(std::string(e.name));
  const std::regex name_re("SPECSERVE_[A-Z0-9_]+");
  const std::regex getenv_re("getenv\\(\"SPECSERVE_");
  const fs::path src = fs::path(SPECSERVE_SOURCE_DIR) / "src";
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    const std::string ext = entry.path().extension().string();
    if (ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".cuh") continue;
    ++files;
    const std::string text = read_text(entry.path());
    const std::string rel = fs::relative(entry.path(), src).string();
    if (rel != "core/env_registry.cpp") {
      EXPECT_FALSE(std::regex_search(text, getenv_re)) << rel << " calls getenv";
    }
    for (auto it = std::sregex_iterator(text.begin(), text.end(), name_re); it != std::sregex_iterator(); ++it) {
      const std::string name = it->str();
      EXPECT_TRUE(registered.count(name) || kBuildMacros.count(name)) << rel << " mentions " << name;
    }
  }
  EXPECT_GT(files, 50);
}
