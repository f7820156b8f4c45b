#pragma once
// An old flag name kept working after a rename: it parses into the same variable as the new name and
// is left out of --help (CLI11's empty group), so scripts keep running and the help shows one name.
#include <CLI/CLI.hpp>

#include <string>

namespace specserve::cli {

template <class T>
CLI::Option* add_hidden_alias(CLI::App& cmd, const std::string& old_name, T& variable, const std::string& new_name) {
  return cmd.add_option(old_name, variable, "Old name of " + new_name)->group("");
}

}  // namespace specserve::cli
