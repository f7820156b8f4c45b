// The DFlash drafter block of config.json and the z-lab default for target_layer_ids.
#include "core/error.h"
#include "io/model_config_parts.h"

namespace specserve {

std::vector<int> default_target_layer_ids(int num_target_layers, int n) {
  SS_CHECK(num_target_layers >= 1 && n >= 1,
           "default_target_layer_ids: need num_target_layers ≥ 1 and n ≥ 1 (got {} and {})", num_target_layers, n);
  if (n == 1) return {num_target_layers / 2};
  // ids_i = round(1 + i·(L−4)/(n−1)) with Python's round-half-to-even, computed exactly on integers
  // (the float quotient is exact at the .5 ties, so this matches the reference bit for bit).
  std::vector<int> ids;
  const int64_t span = num_target_layers - 4, den = n - 1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t num = i * span;
    int64_t q = num / den, r = num % den;
    if (r < 0) {  // floor division for a negative span (L < 4)
      q -= 1;
      r += den;
    }
    int64_t id = 1 + q;
    if (2 * r > den || (2 * r == den && (id & 1))) id += 1;
    ids.push_back(static_cast<int>(id));
  }
  return ids;
}

DFlashConfig parse_dflash_config(const JsonKeys& root, const ModelConfig& c) {
  DFlashConfig d;
  const JsonKeys dc = root.object("dflash_config");
  d.mask_token_id = dc.integer("mask_token_id");
  if (d.mask_token_id < 0 || d.mask_token_id >= c.vocab_size)
    fail("key '{}' ({}) must be in [0, vocab_size {})", dc.key_path("mask_token_id"), d.mask_token_id, c.vocab_size);

  const JsonKeys& block_from = dc.has("block_size") ? dc : root;
  d.block_size = block_from.opt_positive_int("block_size").value_or(16);
  // One slot carries the pending token; a block needs at least one more to draft anything.
  if (d.block_size < 2) fail("key '{}' must be at least 2, found {}", block_from.key_path("block_size"), d.block_size);

  const JsonKeys& layers_from = dc.has("num_target_layers") ? dc : root;
  d.num_target_layers = layers_from.opt_positive_int("num_target_layers").value_or(0);

  if (auto ids = dc.opt_int_list("target_layer_ids")) {
    if (ids->empty()) fail("key '{}' is empty", dc.key_path("target_layer_ids"));
    for (size_t i = 0; i < ids->size(); ++i) {
      const int64_t id = (*ids)[i];
      if (id < 0) fail("key '{}[{}]' ({}) must be non-negative", dc.key_path("target_layer_ids"), i, id);
      if (d.num_target_layers > 0 && id >= d.num_target_layers)
        fail("key '{}[{}]' ({}) is not a layer of the {}-layer target (num_target_layers)",
             dc.key_path("target_layer_ids"), i, id, d.num_target_layers);
      if (id > INT32_MAX) fail("key '{}[{}]' ({}) is out of range", dc.key_path("target_layer_ids"), i, id);
      d.target_layer_ids.push_back(static_cast<int>(id));
    }
  } else {
    // Historic checkpoints: one tap per drafter layer, spread over the target (docs/DFLASH.md §1.3).
    if (d.num_target_layers == 0)
      fail("missing key '{}' (and no 'num_target_layers' to derive it from)", dc.key_path("target_layer_ids"));
    d.target_layer_ids = default_target_layer_ids(d.num_target_layers, c.num_layers);
    for (int id : d.target_layer_ids)
      if (id < 0 || id >= d.num_target_layers)
        fail("num_target_layers {} is too small for the default target_layer_ids of a {}-layer drafter",
             d.num_target_layers, c.num_layers);
  }
  return d;
}

}  // namespace specserve
