#pragma once
// tokenizer.json normalizers: NFC / NFD / NFKC / NFKD and Sequence of them.
#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/unicode.h"

namespace specserve::tokenizer {

class Normalizer {
 public:
  // From the tokenizer.json "normalizer" value (null means none). Unsupported types are Errors.
  static Normalizer from_json(const nlohmann::json& j);

  bool empty() const { return forms_.empty(); }
  std::string apply(std::string_view text) const;

 private:
  std::vector<NormalForm> forms_;  // applied in order
};

}  // namespace specserve::tokenizer
