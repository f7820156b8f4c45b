#pragma once
// The order a matmul may sum along K (ops.h states what each means and who uses which). A header of its
// own, in C++17, so that the matmul kernel choice (matmul_choice.h) and the CUDA launchers can name it
// without the op interface.

namespace specserve {

enum class MatmulOrder { RowInvariant, Free, Prefill };

}  // namespace specserve
