// format_step_bench (cli/step_bench.h): the step benchmark's JSON as labelled text tables.
#include <string>

#include <fmt/format.h>

#include "cli/step_bench.h"

namespace specserve::cli {

namespace {

using nlohmann::json;

double num(const json& j, const char* key) { return j[key].get<double>(); }

// "1.23x" for a key the entry has, else "".
std::string ratio(const json& j, const char* key) {
  return j.contains(key) ? fmt::format("{:.2f}x", num(j, key)) : std::string();
}

std::string header(const json& r) {
  std::string out =
      fmt::format("{} on {} ({}, {}), context {} positions; copy bandwidth {:.0f} GB/s; step weights {:.2f} GB\n",
                  r["model"].get<std::string>(), r["device"].get<std::string>(), r["backend"].get<std::string>(),
                  r["dtype"].get<std::string>(), r["context"].get<int>(), num(r, "copy_bandwidth_gb_s"),
                  num(r, "step_weight_bytes") / 1e9);
  if (r.contains("bf16_step_weight_bytes"))
    out += fmt::format(
        "  fp8 Linear weights kept: {:.2f} GB of codes and scales a step streams, {:.2f} GB as bf16 ({:.2f}x)\n",
        num(r, "step_weight_bytes") / 1e9, num(r, "bf16_step_weight_bytes") / 1e9,
        num(r, "bf16_step_weight_bytes") / num(r, "step_weight_bytes"));
  out += fmt::format("KV budget {:.2f} GiB (--kv-cache-mib), {:.0f} bytes per stored KV element\n",
                     num(r, "kv_budget_bytes") / double(size_t{1} << 30), num(r, "kv_element_bytes"));
  if (r.contains("gemm_rate")) {
    const auto& g = r["gemm_rate"];
    out += fmt::format("bf16 GEMM rate: {:.1f} TFLOP/s ({}x{}x{}, {}; median of {}, {:.3f} ms)\n", num(g, "tflops"),
                       g["m"].get<int64_t>(), g["n"].get<int64_t>(), g["k"].get<int64_t>(), g["how"].get<std::string>(),
                       g["iterations"].get<int>(), num(g, "ms"));
  } else {
    out += "bf16 GEMM rate: not measured (no CUDA device in this run)\n";
  }
  return out;
}

std::string prefill_table(const json& r) {
  std::string out = fmt::format(
      "\nprefill: whole prompts in chunks of {} (the engine's --prefill-chunk), time to the first token id on the host; "
      "median of the timed prefills\n",
      r["prefill_chunk"].get<int>());
  out +=
      "  matmul TFLOP/s is effective: 2 x matmul parameters x tokens / the whole prefill time (an upper-bound-style "
      "figure); attention = the causal attention's share of the FLOPs\n";
  out += fmt::format("{:>8} {:>6} {:>10} {:>11} {:>14} {:>10} {:>12}\n", "tokens", "timed", "tokens/s", "TTFT ms",
                     "matmul TFLOP/s", "attention", "/ GEMM rate");
  for (const auto& p : r["prefill"]) {
    if (p.contains("skipped")) {
      out += fmt::format("{:>8}  {}\n", p["tokens"].get<int>(), p["skipped"].get<std::string>());
      continue;
    }
    out += fmt::format("{:>8} {:>6} {:>10.0f} {:>11.2f} {:>14.1f} {:>9.1f}% {:>12}\n", p["tokens"].get<int>(),
                       p["iterations"].get<int>(), num(p, "tokens_per_s"), num(p, "ttft_ms"),
                       num(p, "matmul_tflops_effective"), 100 * num(p, "attention_share"),
                       p.contains("matmul_fraction_of_gemm_rate")
                           ? fmt::format("{:.1f}%", 100 * num(p, "matmul_fraction_of_gemm_rate"))
                           : std::string("-"));
  }
  if (r.contains("matmul_prefill")) {
    const auto& m = r["matmul_prefill"];
    out += fmt::format("Ops::matmul_prefill alone, [{}, {}] x [{}, {}]^T ({} weights): {:.3f} ms = {:.1f} TFLOP/s{}\n",
                       m["m"].get<int64_t>(), m["k"].get<int64_t>(), m["n"].get<int64_t>(), m["k"].get<int64_t>(),
                       m["weight_dtype"].get<std::string>(), num(m, "ms"), num(m, "tflops"),
                       m.contains("fraction_of_gemm_rate")
                           ? fmt::format(" ({:.1f}% of the GEMM rate)", 100 * num(m, "fraction_of_gemm_rate"))
                           : std::string());
  }
  return out;
}

std::string batch_tables(const json& r) {
  const bool fp8 = r.contains("bf16_step_weight_bytes");
  std::string out = fmt::format(
      "\ndecode at {} positions, B sequences x 1 row; roof ms = GB moved / copy bandwidth{}\n", r["context"].get<int>(),
      fp8 ? " (fp8 weights as streamed; bf16 GB / bf16 roof: the same step with bf16 weights)" : "");
  out += fmt::format("{:>8} {:>10} {:>10} {:>9} {:>9} {:>9} {:>10} {:>12}", "decode B", "ms", "GB moved", "roof ms",
                     "GB/s", "roofline", "tokens/s", "host enqueue");
  out += fp8 ? fmt::format(" {:>9} {:>10}\n", "bf16 GB", "bf16 roof") : "\n";
  for (const auto& d : r["decode"]) {
    out +=
        fmt::format("{:>8} {:>10.3f} {:>10.2f} {:>9.3f} {:>9.0f} {:>8.0f}% {:>10.0f} {:>9.3f} ms",
                    d["batch"].get<int>(), num(d, "ms"), num(d, "bytes") / 1e9, num(d, "roofline_ms"), num(d, "gb_s"),
                    100 * num(d, "roofline_fraction"), num(d, "tokens_per_s"), num(d, "host_enqueue_ms"));
    out += fp8 && d.contains("bf16_bytes")
               ? fmt::format(" {:>9.2f} {:>7.3f} ms\n", num(d, "bf16_bytes") / 1e9, num(d, "bf16_roofline_ms"))
               : "\n";
  }
  out += fmt::format("\nverify at {} positions, B sequences x K rows, then commit(1)\n", r["context"].get<int>());
  out += fmt::format("{:>8} {:>4} {:>10} {:>12}\n", "verify B", "K", "ms", "/ decode(B)");
  for (const auto& v : r["verify"])
    out += fmt::format("{:>8} {:>4} {:>10.3f} {:>12}\n", v["batch"].get<int>(), v["k"].get<int>(), num(v, "ms"),
                       ratio(v, "ratio_to_decode"));
  if (r.contains("propose")) {
    out += fmt::format("\ndrafter propose at {} positions, B blocks\n", r["context"].get<int>());
    out += fmt::format(
        "{:>9} {:>10} {:>12}   (drafter weights {:.2f} GB, head {:.2f} GB over {} ids, --draft-matmul {})\n",
        "propose B", "ms", "/ decode(B)", num(r, "drafter_weight_bytes") / 1e9, num(r, "draft_head_bytes") / 1e9,
        r["draft_vocab"].get<int64_t>(), r["draft_matmul"].get<std::string>());
    for (const auto& v : r["propose"])
      out += fmt::format("{:>9} {:>10.3f} {:>12}\n", v["batch"].get<int>(), num(v, "ms"),
                         v.contains("fraction_of_decode") ? fmt::format("{:.1f}%", 100 * num(v, "fraction_of_decode"))
                                                          : std::string());
  }
  if (r.contains("projection"))
    for (const auto& v : r["projection"])
      out += fmt::format("projected at tau {:.2f}, B={}: plain {:.0f} tokens/s, DFlash {:.0f} tokens/s ({:.2f}x)\n",
                         num(v, "tau"), v["batch"].get<int>(), num(v, "plain_tokens_per_s"),
                         num(v, "dflash_tokens_per_s"), num(v, "speedup"));
  return out;
}

std::string context_table(const json& r) {
  if (!r.contains("contexts") || r["contexts"].empty()) return {};
  const bool propose = r.contains("propose");
  std::string out =
      "\nlong contexts, 1 sequence: decode, verify with the largest K, propose; x = over the first entry; KV read = the "
      "bytes a decode row reads at that context over the decode time (marginal: the extra KV over the extra time "
      "against the first entry), as a share of the copy bandwidth\n";
  out += fmt::format("{:>9} {:>9} {:>7} {:>9} {:>7} {:>7} {:>9} {:>7} {:>9} {:>8} {:>9}\n", "positions", "decode ms",
                     "x", "verify ms", "x", "/dec", propose ? "propose" : "", propose ? "x" : "", "KV GB", "KV read",
                     "marginal");
  for (const auto& c : r["contexts"]) {
    if (c.contains("skipped")) {
      out += fmt::format("{:>9}  {}\n", c["positions"].get<int>(), c["skipped"].get<std::string>());
      continue;
    }
    out += fmt::format(
        "{:>9} {:>9.3f} {:>7} {:>9.3f} {:>7} {:>7} {:>9} {:>7} {:>9.2f} {:>7.1f}% {:>9}\n", c["positions"].get<int>(),
        num(c, "decode_ms"), ratio(c, "decode_ratio_to_first"), num(c, "verify_ms"), ratio(c, "verify_ratio_to_first"),
        ratio(c, "verify_ratio_to_decode"), c.contains("propose_ms") ? fmt::format("{:.3f}", num(c, "propose_ms")) : "",
        ratio(c, "propose_ratio_to_first"), num(c, "kv_read_bytes") / 1e9, 100 * num(c, "kv_read_fraction_of_copy"),
        c.contains("kv_marginal_fraction_of_copy")
            ? fmt::format("{:.1f}%", 100 * num(c, "kv_marginal_fraction_of_copy"))
            : std::string());
  }
  return out;
}

std::string collective_table(const json& r) {
  if (!r.contains("collective") || r["collective"].empty()) return {};
  std::string out = fmt::format(
      "\ntensor parallel, {} ranks in {}: the collective alone at a decode step's shapes (all-reduces of [B, "
      "hidden], one gather of [B, vocab]), its share of the decode step\n",
      r["tensor_parallel"].get<int>(), r.value("tensor_parallel_placement", std::string("one memory")));
  out += fmt::format("{:>8} {:>10} {:>13} {:>11} {:>13} {:>10} {:>8}\n", "decode B", "all-reduces", "all-reduce ms",
                     "gather ms", "collective ms", "decode ms", "share");
  for (const auto& c : r["collective"])
    out += fmt::format("{:>8} {:>10} {:>13.3f} {:>11.3f} {:>13.3f} {:>10.3f} {:>7.1f}%\n", c["batch"].get<int>(),
                       c["all_reduce_calls"].get<int>(), num(c, "all_reduce_ms"), num(c, "all_gather_ms"),
                       num(c, "collective_ms"), num(c, "decode_ms"), 100 * num(c, "share_of_decode"));
  return out;
}

}  // namespace

std::string format_step_bench(const json& r) {
  std::string out = header(r) + prefill_table(r) + batch_tables(r) + collective_table(r) + context_table(r);
  if (r.contains("cuda_graphs")) {
    const auto& g = r["cuda_graphs"];
    out += fmt::format(
        "\nCUDA graphs {}: {} launches in {} segments; {} graph launches ({} captures), {} direct, "
        "{} node updates\n",
        g["enabled"].get<bool>() ? "on" : "off", g["launches"].get<uint64_t>(), g["segments"].get<uint64_t>(),
        g["graph_launches"].get<uint64_t>(), g["captures"].get<uint64_t>(), g["direct_segments"].get<uint64_t>(),
        g["node_updates"].get<uint64_t>());
  }
  return out;
}

}  // namespace specserve::cli
