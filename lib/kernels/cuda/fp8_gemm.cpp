#include "kernels/cuda/fp8_gemm.hpp"

#include <string>

#include "core/error.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/gemm.hpp"

namespace mgt::cuda {
namespace {

cudaDataType_t fp8_type(Fp8Format format) {
  return format == Fp8Format::kE4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2;
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// What cuBLASLt's FP8 GEMMs require of their operands: every dimension a multiple of 16 (so the
// leading dimensions are too), 16-byte aligned matrices and 16-byte aligned scale factors (a
// misaligned scale pointer fails the launch as "not supported").
bool fp8_gemm_fits(ConstFp8View x, ConstFp8View w, const void* y, int64_t rows, int64_t in, int64_t out) {
  const auto fits = [](int64_t d) { return d > 0 && d % 16 == 0; };
  return fits(rows) && fits(in) && fits(out) && aligned16(x.codes.data()) && aligned16(w.codes.data()) &&
         aligned16(y) && aligned16(x.scale_inv.raw()) && aligned16(w.scale_inv.raw());
}

// Fast accumulation (the tensor cores' narrower accumulator) for the forward GEMMs only, as
// Transformer Engine sets it (Fp8GemmRole).
bool fast_accumulation(Fp8GemmRole role) { return role == Fp8GemmRole::kForward; }

void refuse_e5m2_pair(ConstFp8View x, ConstFp8View w, const char* name) {
  if (x.format == Fp8Format::kE5M2 && w.format == Fp8Format::kE5M2) {
    throw Error(std::string(name) + ": no FP8 GEMM multiplies E5M2 by E5M2 (one operand must be E4M3)");
  }
}

// yᵀ[out, rows] = w[out, in]·xᵀ[in, rows] (the epilogue's): A = w (k×m stored, transposed), B = xᵀ.
bool gemm(LtMatmul& lt, ConstFp8View x, ConstFp8View w, int64_t rows, int64_t in, int64_t out, Out y,
          bool accumulate, Fp8GemmRole role, LtEpilogue epilogue, const void* bias, LtAux aux, const char* name) {
  return lt.matmul_fp8(out, rows, in, w.codes.data(), fp8_type(w.format), x.codes.data(), fp8_type(x.format),
                       {w.scale_inv.data(), x.scale_inv.data()}, fast_accumulation(role),
                       accumulate ? 1.0f : 0.0f, y.raw(), data_type(y.type()), epilogue, bias, aux, name);
}

// The GELU epilogues write y and their aux (pre, of y's type) in bf16 or fp16 and read a bias of
// that type.
bool gelu_epilogue_fits(ConstFp8View x, ConstFp8View w, In bias, const void* pre, Out y, int64_t rows, int64_t in,
                        int64_t out) {
  return fp8_gemm_fits(x, w, y.raw(), rows, in, out) && y.narrow() && aligned16(pre) &&
         (bias == nullptr || (bias.type() == y.type() && aligned16(bias.raw())));
}

}  // namespace

bool fp8_linear(LtMatmul& lt, ConstFp8View x, ConstFp8View w, In bias, int64_t rows, int64_t in, int64_t out,
                Out y, bool accumulate, Fp8GemmRole role, cudaStream_t stream) {
  refuse_e5m2_pair(x, w, "fp8_linear");
  if (rows == 0 || out == 0) return true;  // y is empty
  if (!fp8_gemm_fits(x, w, y.raw(), rows, in, out)) return false;
  // cuBLASLt's FP8 GEMMs take a bias of D's type for bf16 and fp16 D, and only a bf16 one for
  // fp32 D: an fp32 y (the weight gradient's main gradient) or a bias of another type than y's is
  // added after the GEMM.
  if (bias != nullptr && y.narrow() && bias.type() == y.type() && aligned16(bias.raw()) &&
      gemm(lt, x, w, rows, in, out, y, accumulate, role, LtEpilogue::kBias, bias.raw(), {}, "fp8_linear")) {
    return true;
  }
  if (!gemm(lt, x, w, rows, in, out, y, accumulate, role, LtEpilogue::kNone, nullptr, {}, "fp8_linear")) return false;
  if (bias != nullptr) add_bias(y, bias, rows, out, stream);
  return true;
}

bool fp8_linear_gelu_tanh_forward(LtMatmul& lt, ConstFp8View x, ConstFp8View w, In bias, int64_t rows, int64_t in,
                                  int64_t out, Out pre, Out y) {
  refuse_e5m2_pair(x, w, "fp8_linear_gelu_tanh_forward");
  if (rows == 0 || out == 0) return true;
  if (!gelu_epilogue_fits(x, w, bias, pre.raw(), y, rows, in, out) || pre.type() != y.type()) return false;
  return gemm(lt, x, w, rows, in, out, y, false, Fp8GemmRole::kForward,
              bias == nullptr ? LtEpilogue::kGeluTanhAux : LtEpilogue::kGeluTanhAuxBias, bias.raw(), {pre.raw(), out},
              "fp8_linear_gelu_tanh_forward");
}

}  // namespace mgt::cuda
