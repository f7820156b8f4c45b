#include "tokenizer/normalizer.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace specserve::tokenizer {

namespace {

void collect(const nlohmann::json& j, std::vector<NormalForm>& forms) {
  if (j.is_null()) return;
  SS_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(),
           "normalizer: expected an object with a \"type\"");
  const std::string type = j["type"];
  if (type == "NFC") {
    forms.push_back(NormalForm::NFC);
  } else if (type == "NFD") {
    forms.push_back(NormalForm::NFD);
  } else if (type == "NFKC") {
    forms.push_back(NormalForm::NFKC);
  } else if (type == "NFKD") {
    forms.push_back(NormalForm::NFKD);
  } else if (type == "Sequence") {
    SS_CHECK(j.contains("normalizers") && j["normalizers"].is_array(), "normalizer Sequence: missing \"normalizers\"");
    for (const auto& n : j["normalizers"]) collect(n, forms);
  } else {
    fail("normalizer type '{}' is not supported (supported: NFC, NFD, NFKC, NFKD, Sequence)", type);
  }
}

}  // namespace

Normalizer Normalizer::from_json(const nlohmann::json& j) {
  Normalizer n;
  collect(j, n.forms_);
  return n;
}

std::string Normalizer::apply(std::string_view text) const {
  std::string s(text);
  for (const NormalForm f : forms_) s = normalize(s, f);
  return s;
}

}  // namespace specserve::tokenizer
