#include "backend/matmul_choice.h"

// The K split and the 17-64-row kernel's wave rule are the kernels' own (plain C++ on the host too).
#include "backend/cuda/matmul_tensor_core.cuh"

namespace specserve {

namespace {

// The tensor-core kernels' 16-byte weight loads: an aligned address and rows a multiple of 8 elements
// apart (or one row).
bool vec_w(const MatmulWeight& w) { return w.w_aligned16 && (w.N == 1 || w.ldw % 8 == 0); }

// The rules over n weights ws[0 .. n) (pointer and count: a one-weight call allocates nothing).

// cuBLASLt's conditions (matmul_free_order.cpp): bf16 weights it can address, from kFreeOrderMinRows.
bool free_order_takes(int64_t M, int64_t K, const MatmulWeight* ws, size_t n) {
  if (n == 0 || n > size_t{kFreeOrderMaxParts} || M < kFreeOrderMinRows || K % 8 != 0) return false;
  for (size_t i = 0; i < n; ++i) {
    const MatmulWeight& w = ws[i];
    if (!w.bf16 || w.ldw % 8 != 0 || !w.w_aligned16 || w.ldy < w.N || w.N <= 0) return false;
  }
  return true;
}

// The prefill GEMM's conditions (cuda/matmul_prefill_sm90a.cu: prefill_matmul_fits): a property of the
// weights and K only, never of M, so a prefill row's kernel — and its bits — do not depend on its chunk.
bool prefill_takes(int64_t K, const MatmulWeight* ws, size_t n, const MatmulDevice& d) {
  if (n == 0 || !d.wgmma || K <= 0 || K % 8 != 0) return false;
  for (size_t i = 0; i < n; ++i)
    if (!ws[i].bf16 || ws[i].N <= 0 || !ws[i].w_aligned16 || ws[i].ldw % 8 != 0) return false;
  return true;
}

// The TMA-fed slice-serial kernel's conditions (cuda/matmul_wgmma_tma_sm90a.cu: wgmma_tma_fits, plus the rows).
bool wgmma_tma_takes(int64_t M, int64_t K, const MatmulWeight* ws, size_t n, const MatmulDevice& d) {
  constexpr int64_t kDimMax = 2147483647;
  if (n == 0 || !d.wgmma || M < kWgmmaTmaMinRows || M > kWgmmaTmaMaxRows || K <= 0 || K % 8 != 0 || K > kDimMax)
    return false;
  for (size_t i = 0; i < n; ++i) {
    const MatmulWeight& w = ws[i];
    if (!w.bf16 || w.fp8 || w.N <= 0 || w.N > kDimMax || !w.w_aligned16 || w.ldw % 8 != 0) return false;
  }
  return true;
}

bool share_split(int64_t M, int64_t K, const MatmulWeight* ws, size_t n) {
  if (n == 0 || n > size_t{kMatmulGroupMax} || M <= 0 || K <= 0) return false;
  const cuda::tc::KSplit split = cuda::tc::k_split(ws[0].N, K, cuda::tc::split_target_ctas());
  for (size_t i = 0; i < n; ++i) {
    const MatmulWeight& w = ws[i];
    const cuda::tc::KSplit s = cuda::tc::k_split(w.N, K, cuda::tc::split_target_ctas());
    if (!w.bf16 || w.N <= 0 || s.S != split.S || s.cps != split.cps) return false;
  }
  return true;
}

bool mid_takes(int64_t M, int64_t K, const MatmulWeight* ws, size_t n, int sms) {
  if (M < kMidMinRows || M > kMidMaxRows || K % 8 != 0 || !share_split(M, K, ws, n)) return false;
  const int S = cuda::tc::k_split(ws[0].N, K, cuda::tc::split_target_ctas()).S;
  if (S != 4 && S != 8) return false;
  int64_t ctas = 0;  // column blocks over all the weights (one CTA row: M <= 64)
  for (size_t i = 0; i < n; ++i) {
    if (!vec_w(ws[i])) return false;
    ctas += cuda::tc::ceil_div(ws[i].N, kMidColumns);
  }
  return cuda::tc::mid_fills_waves(M, ctas, sms);
}

// Block-scaled fp8 weights that share one fp8 gemv launch (q/k/v, gate/up, Qwen3.5's in_proj_qkv / in_proj_z):
// 1-32 rows, any K splits (the kernel takes each weight's own: cuda/matmul_fp8_gemv.cu).
bool fp8_share_launch(int64_t M, int64_t K, const MatmulWeight* ws, size_t n) {
  if (n == 0 || n > size_t{kMatmulGroupMax} || M <= 0 || M > kGemvMaxRows || K <= 0) return false;
  for (size_t i = 0; i < n; ++i)
    if (!ws[i].fp8 || ws[i].N <= 0) return false;
  return true;
}

// The W8A8 prefill GEMM's conditions (cuda/matmul_prefill_fp8_sm90a.cu: fp8_prefill_fits): a property of the
// weight, K and the device only, never of M (a prefill row's kernel must not depend on its chunk).
bool fp8_prefill_takes(int64_t K, const MatmulWeight& w, const MatmulDevice& d) {
  constexpr int64_t kDimMax = 2147483647;
  return d.wgmma && d.fp8_w8a8 && w.fp8 && K > 0 && K <= kDimMax && w.N > 0 && w.N <= kDimMax && w.w_aligned16 &&
         w.ldw % 16 == 0;
}

// A block-scaled fp8 weight, any order: the streaming fp8 kernel for 1-32 rows (every order but Prefill);
// under Prefill the W8A8 GEMM where it takes the weight, for every M; else the weight's bf16 dequantisation
// through the bf16 plan (under Prefill for every M too: the prefill GEMM's bits do not depend on M, and a
// prefill row's kernel must not either).
MatmulKernel choose_fp8(MatmulOrder order, int64_t M, int64_t K, const MatmulWeight& w, const MatmulDevice& d) {
  if (M <= 0 || w.N <= 0) return MatmulKernel::Empty;
  if (K <= 0) return MatmulKernel::ZeroFill;
  if (order == MatmulOrder::Prefill && fp8_prefill_takes(K, w, d)) return MatmulKernel::Fp8Prefill;
  if (order != MatmulOrder::Prefill && M <= kGemvMaxRows) return MatmulKernel::Fp8Gemv;
  return MatmulKernel::Fp8Dequant;
}

// One weight, row-invariant order.
MatmulKernel choose_one(int64_t M, int64_t K, const MatmulWeight& w, const MatmulDevice& d) {
  if (M <= 0 || w.N <= 0) return MatmulKernel::Empty;
  if (K <= 0) return MatmulKernel::ZeroFill;
  if (!w.bf16) return MatmulKernel::CudaCoreF32;
  if (mid_takes(M, K, &w, 1, d.sms)) return MatmulKernel::Mid;
  if (M <= kGemvMaxRows) return MatmulKernel::Gemv;
  if (wgmma_tma_takes(M, K, &w, 1, d)) return MatmulKernel::WgmmaTma;
  if (d.wgmma) return matmul_wgmma_serial(M, K, w, d.sms) ? MatmulKernel::WgmmaSerial : MatmulKernel::Wgmma;
  return MatmulKernel::Tiled;
}

std::vector<int> all_parts(size_t n) {
  std::vector<int> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int>(i);
  return v;
}

}  // namespace

std::string_view matmul_kernel_name(MatmulKernel k) {
  switch (k) {
    case MatmulKernel::Cpu: return "cpu";
    case MatmulKernel::Empty: return "empty";
    case MatmulKernel::ZeroFill: return "zero-fill";
    case MatmulKernel::CudaCoreF32: return "cuda-core-f32";
    case MatmulKernel::FreeOrder: return "free-order-cublaslt";
    case MatmulKernel::Mid: return "mid";
    case MatmulKernel::Gemv: return "gemv";
    case MatmulKernel::Wgmma: return "wgmma";
    case MatmulKernel::WgmmaSerial: return "wgmma-serial";
    case MatmulKernel::WgmmaTma: return "wgmma-tma";
    case MatmulKernel::Tiled: return "tiled";
    case MatmulKernel::Prefill: return "prefill";
    case MatmulKernel::Fp8Gemv: return "fp8-gemv";
    case MatmulKernel::Fp8Dequant: return "fp8-dequant";
    case MatmulKernel::Fp8Prefill: return "fp8-prefill";
  }
  return "?";
}

bool matmul_parts_share_split(int64_t M, int64_t K, const std::vector<MatmulWeight>& ws) {
  return share_split(M, K, ws.data(), ws.size());
}

bool matmul_mid_takes(int64_t M, int64_t K, const std::vector<MatmulWeight>& ws, int sms) {
  return mid_takes(M, K, ws.data(), ws.size(), sms);
}

bool matmul_wgmma_tma_takes(int64_t M, int64_t K, const std::vector<MatmulWeight>& ws, const MatmulDevice& d) {
  return wgmma_tma_takes(M, K, ws.data(), ws.size(), d);
}

bool matmul_wgmma_serial(int64_t M, int64_t K, const MatmulWeight& w, int sms) {
  if (!w.bf16 || !vec_w(w) || K % 8 != 0 || K <= 0 || M <= 0 || w.N <= 0) return false;
  const int64_t tiles = cuda::tc::ceil_div(M, kWgmmaSerialTile) * cuda::tc::ceil_div(w.N, kWgmmaSerialTile);
  return cuda::tc::k_split(w.N, K, cuda::tc::split_target_ctas()).S > 1 && 2 * tiles >= 5 * int64_t{sms};
}

MatmulPlan plan_matmul(const MatmulCall& c) {
  const std::vector<MatmulWeight>& ws = c.weights;
  const size_t n = ws.size();
  if (n == 0) return {};
  if (c.backend == MatmulBackend::Cpu) return {{{MatmulKernel::Cpu, all_parts(n)}}};
  bool any_fp8 = false;
  for (const MatmulWeight& w : ws) any_fp8 = any_fp8 || w.fp8;
  if (any_fp8) {  // each fp8 weight its own kernel, but up to 4 fp8 gemv weights share a launch (any K splits),
                  // and the W8A8 prefill GEMM takes all of its weights in one launch (one quantised copy of x);
                  // the other weights (Qwen3.5's bf16 in_proj_a / in_proj_b beside the fp8 in_proj_qkv / z)
                  // are planned together by the bf16 rules below, after them
    MatmulPlan plan;
    std::vector<bool> done(n, false);
    std::vector<int> rest;
    for (size_t i = 0; i < n; ++i) {
      if (done[i]) continue;
      if (!ws[i].fp8) {
        rest.push_back(static_cast<int>(i));
        continue;
      }
      const MatmulKernel k = choose_matmul(c.backend, c.order, c.M, c.K, ws[i], c.device);
      std::vector<int> group{static_cast<int>(i)};
      if (k == MatmulKernel::Fp8Prefill) {
        for (size_t j = i + 1; j < n; ++j)
          if (!done[j] && choose_matmul(c.backend, c.order, c.M, c.K, ws[j], c.device) == MatmulKernel::Fp8Prefill) {
            group.push_back(static_cast<int>(j));
            done[j] = true;
          }
        plan.launches.push_back({k, group});
        continue;
      }
      std::vector<MatmulWeight> gw{ws[i]};
      for (size_t j = i + 1; k == MatmulKernel::Fp8Gemv && j < n && static_cast<int>(group.size()) < kMatmulGroupMax;
           ++j) {
        if (done[j]) continue;
        gw.push_back(ws[j]);
        if (fp8_share_launch(c.M, c.K, gw.data(), gw.size())) {
          group.push_back(static_cast<int>(j));
          done[j] = true;
        } else {
          gw.pop_back();
        }
      }
      plan.launches.push_back({k, group});
    }
    if (!rest.empty()) {
      MatmulCall others = c;
      others.weights.clear();
      for (int i : rest) others.weights.push_back(ws[static_cast<size_t>(i)]);
      for (MatmulLaunch l : plan_matmul(others).launches) {
        for (int& i : l.parts) i = rest[static_cast<size_t>(i)];
        plan.launches.push_back(std::move(l));
      }
    }
    return plan;
  }
  if (c.order == MatmulOrder::Free && free_order_takes(c.M, c.K, ws.data(), n))
    return {{{MatmulKernel::FreeOrder, all_parts(n)}}};
  if (c.order == MatmulOrder::Prefill && c.M > 0 && prefill_takes(c.K, ws.data(), n, c.device))
    return {{{MatmulKernel::Prefill, all_parts(n)}}};
  if (matmul_mid_takes(c.M, c.K, ws, c.device.sms)) return {{{MatmulKernel::Mid, all_parts(n)}}};
  if (wgmma_tma_takes(c.M, c.K, ws.data(), n, c.device)) return {{{MatmulKernel::WgmmaTma, all_parts(n)}}};
  MatmulPlan plan;
  // Above the gemv kernel's rows, one bf16 copy of x for every weight, each its own wgmma launch.
  bool all_wgmma = c.device.wgmma && c.M > kGemvMaxRows && c.K > 0;
  for (const MatmulWeight& w : ws) all_wgmma = all_wgmma && w.bf16 && w.N > 0;
  if (all_wgmma) {
    for (size_t i = 0; i < n; ++i) {
      const bool serial = matmul_wgmma_serial(c.M, c.K, ws[i], c.device.sms);
      plan.launches.push_back({serial ? MatmulKernel::WgmmaSerial : MatmulKernel::Wgmma, {static_cast<int>(i)}});
    }
    plan.one_x_copy = true;
    return plan;
  }
  // Else the weights that share a K split share a streaming launch (up to 32 rows), in order; the rest
  // run alone.
  std::vector<bool> done(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (done[i]) continue;
    std::vector<int> group{static_cast<int>(i)};
    std::vector<MatmulWeight> gw{ws[i]};
    for (size_t j = i + 1; j < n && static_cast<int>(group.size()) < kMatmulGroupMax; ++j) {
      if (done[j]) continue;
      gw.push_back(ws[j]);
      if (c.M <= kGemvMaxRows && matmul_parts_share_split(c.M, c.K, gw)) {
        group.push_back(static_cast<int>(j));
        done[j] = true;
      } else {
        gw.pop_back();
      }
    }
    if (group.size() > 1)
      plan.launches.push_back(
          {matmul_mid_takes(c.M, c.K, gw, c.device.sms) ? MatmulKernel::Mid : MatmulKernel::Gemv, group});
    else
      plan.launches.push_back({choose_one(c.M, c.K, ws[i], c.device), group});
  }
  return plan;
}

MatmulKernel choose_matmul(MatmulBackend backend, MatmulOrder order, int64_t M, int64_t K, const MatmulWeight& w,
                           const MatmulDevice& device) {
  // plan_matmul's rules for one weight, without building a plan (no allocation: most matmuls of a step
  // are one-weight calls); tests/backend/test_matmul_choice.cpp checks the two agree.
  if (backend == MatmulBackend::Cpu) return MatmulKernel::Cpu;
  if (w.fp8) return choose_fp8(order, M, K, w, device);
  if (order == MatmulOrder::Free && free_order_takes(M, K, &w, 1)) return MatmulKernel::FreeOrder;
  if (order == MatmulOrder::Prefill && M > 0 && prefill_takes(K, &w, 1, device)) return MatmulKernel::Prefill;
  return choose_one(M, K, w, device);
}

}  // namespace specserve
