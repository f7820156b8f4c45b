// The safetensors framing (8-byte length prefix) and header parser, with the full validation that
// lets the rest of the code trust every entry: a view built from a validated entry never reads
// outside the data section.
#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "io/json_parse.h"
#include "io/printable.h"
#include "io/safetensors.h"

namespace specserve {

namespace {

using json = nlohmann::json;

// Dtypes the format defines that specserve has no element type for (sub-byte floats, MX scales,
// complex): named in a clearer error than a misspelt dtype gets.
constexpr std::array<std::string_view, 5> kKnownUnsupportedDTypes = {"F4", "F6_E2M3", "F6_E3M2", "F8_E8M0", "C64"};

DType parse_entry_dtype(const json& entry) {
  auto it = entry.find("dtype");
  if (it == entry.end()) fail("missing 'dtype'");
  if (!it->is_string()) fail("'dtype' is {}, expected a string", json_type_name(*it));
  const auto& name = it->get_ref<const std::string&>();
  if (auto t = parse_dtype(name)) return *t;
  if (std::find(kKnownUnsupportedDTypes.begin(), kKnownUnsupportedDTypes.end(), name) != kKnownUnsupportedDTypes.end())
    fail("dtype {} is not supported by specserve", quoted_name(name));
  fail("unknown dtype {}", quoted_name(name));
}

// A dimension or offset: a non-negative JSON integer not above `max`.
uint64_t parse_count(const json& v, std::string_view what, uint64_t max) {
  if (v.is_number_unsigned()) {
    uint64_t x = v.get<uint64_t>();
    if (x > max) fail("{} {} is too large", what, x);
    return x;
  }
  if (v.is_number_integer()) fail("{} {} is negative", what, v.get<int64_t>());
  fail("{} is {}, expected a non-negative integer", what, json_type_name(v));
}

Shape parse_entry_shape(const json& entry) {
  auto it = entry.find("shape");
  if (it == entry.end()) fail("missing 'shape'");
  if (!it->is_array()) fail("'shape' is {}, expected an array", json_type_name(*it));
  if (it->size() > static_cast<size_t>(kMaxDims))
    fail("shape has {} dimensions, more than the supported {}", it->size(), kMaxDims);
  // The product of the non-zero dimensions bounds every partial product (strides, element count),
  // so checking it once keeps all later int64 arithmetic on this shape free of overflow.
  Shape shape;
  uint64_t product = 1;
  for (const auto& d : *it) {
    uint64_t dim = parse_count(d, "shape dimension", std::numeric_limits<int64_t>::max());
    if (dim != 0 && (__builtin_mul_overflow(product, dim, &product) ||
                     product > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
      fail("shape {} overflows the element count", it->dump());
    shape.push_back(static_cast<int64_t>(dim));
  }
  return shape;
}

void parse_entry_offsets(const json& entry, SafetensorsEntry& e, uint64_t data_size) {
  auto it = entry.find("data_offsets");
  if (it == entry.end()) fail("missing 'data_offsets'");
  if (!it->is_array() || it->size() != 2) fail("'data_offsets' must be an array [begin, end]");
  e.begin = parse_count((*it)[0], "data_offsets begin", std::numeric_limits<uint64_t>::max());
  e.end = parse_count((*it)[1], "data_offsets end", std::numeric_limits<uint64_t>::max());
  if (e.begin > e.end) fail("data_offsets [{}, {}] end before they begin", e.begin, e.end);
  if (e.end > data_size)
    fail("data_offsets [{}, {}] out of range: the data section is {} bytes", e.begin, e.end, data_size);
  uint64_t expected = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(e.shape.numel()), dtype_size(e.dtype), &expected))
    fail("shape {} × {} overflows the byte size", e.shape.to_string(), dtype_name(e.dtype));
  if (e.end - e.begin != expected)
    fail("shape {} × {} is {} bytes, but data_offsets [{}, {}] span {} bytes", e.shape.to_string(), dtype_name(e.dtype),
         expected, e.begin, e.end, e.end - e.begin);
}

SafetensorsEntry parse_entry(const std::string& name, const json& entry, uint64_t data_size) {
  if (!entry.is_object()) fail("entry is {}, expected an object", json_type_name(entry));
  SafetensorsEntry e;
  e.name = name;
  e.dtype = parse_entry_dtype(entry);
  e.shape = parse_entry_shape(entry);
  parse_entry_offsets(entry, e, data_size);
  return e;
}

std::map<std::string, std::string> parse_metadata(const json& m) {
  if (!m.is_object()) fail("'__metadata__' is {}, expected an object", json_type_name(m));
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : m.items()) {
    if (!value.is_string())
      fail("'__metadata__' value of {} is {}, expected a string", quoted_name(key), json_type_name(value));
    out.emplace(key, value.get<std::string>());
  }
  return out;
}

// The tensors must tile [0, data_size) exactly, as the reference reader demands: an overlap would let
// two tensors alias, a gap or trailing bytes mean the file is not what its header says.
void check_tiling(const std::vector<SafetensorsEntry>& entries, uint64_t data_size) {
  uint64_t expected_begin = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const auto& e : entries) {
    if (e.begin < expected_begin)
      fail("tensor {}: data_offsets [{}, {}] overlap tensor {} [{}, {}]", quoted_name(e.name), e.begin, e.end,
           quoted_name(previous->name), previous->begin, previous->end);
    if (e.begin > expected_begin)
      fail("tensor {}: data_offsets [{}, {}] leave a gap of {} bytes before it", quoted_name(e.name), e.begin, e.end,
           e.begin - expected_begin);
    expected_begin = e.end;
    previous = &e;
  }
  if (expected_begin != data_size)
    fail("the data section is {} bytes but the tensors cover only {}", data_size, expected_begin);
}

}  // namespace

SafetensorsFraming read_safetensors_framing(std::string_view file_start, uint64_t file_size) {
  if (file_size < 8 || file_start.size() < 8)
    fail("truncated: {} bytes, too short for the 8-byte header length", file_size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(file_start[i]);
  if (n > kMaxSafetensorsHeaderBytes)
    fail("header length {} is above the {}-byte limit (corrupt or not a safetensors file)", n,
         kMaxSafetensorsHeaderBytes);
  if (n > file_size - 8) fail("truncated: header length {} runs past the end of the {}-byte file", n, file_size);
  return SafetensorsFraming{n, 8 + n, file_size - 8 - n};
}

SafetensorsHeader parse_safetensors_header(std::string_view header_json, uint64_t data_size) {
  std::optional<DuplicateKey> duplicate;
  json root = parse_json(header_json, "header", &duplicate);
  if (!root.is_object()) fail("header is {}, expected an object", json_type_name(root));
  if (duplicate) {
    if (duplicate->depth == 1) fail("duplicate tensor name {}", quoted_name(duplicate->key));
    fail("duplicate key {} in a header entry", quoted_name(duplicate->key));
  }
  SafetensorsHeader header;
  header.entries.reserve(root.size());
  for (auto it = root.begin(); it != root.end(); ++it) {
    // Plain references, not a structured binding: clang 14 (the fuzz build) cannot capture those.
    const std::string& name = it.key();
    const json& value = it.value();
    if (name == "__metadata__") {
      header.metadata = parse_metadata(value);
      continue;
    }
    if (name.empty()) fail("a tensor has an empty name");
    header.entries.push_back(
        with_context("tensor " + quoted_name(name), [&] { return parse_entry(name, value, data_size); }));
  }
  std::sort(header.entries.begin(), header.entries.end(),
            [](const auto& a, const auto& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  check_tiling(header.entries, data_size);
  return header;
}

}  // namespace specserve
