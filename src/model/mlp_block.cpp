// Dense SwiGLU MLP (docs/MODELS.md §1.2): down(silu(gate(x)) * up(x)).
#include "model/layers.h"

namespace specserve {

MlpBlock load_mlp(WeightStore& w, const ArchSpec& s, int i) {
  const std::string p = "layers." + std::to_string(i) + ".mlp.";
  MlpBlock b;
  b.gate = w.text_linear(p + "gate_proj.weight", {s.intermediate, s.hidden});
  b.up = w.text_linear(p + "up_proj.weight", {s.intermediate, s.hidden});
  b.down = w.text_linear(p + "down_proj.weight", {s.hidden, s.intermediate});
  return b;
}

void MlpBlock::forward(BatchContext& ctx, const TensorView& x, const TensorView& out) const {
  MemTensor g = MemTensor::empty(*ctx.mem, DType::F32, {ctx.rows, gate.dim(0)});
  MemTensor u = MemTensor::empty(*ctx.mem, DType::F32, {ctx.rows, up.dim(0)});
  ctx.swiglu_mlp(x, gate, up, down, g, u, out);
}

}  // namespace specserve
