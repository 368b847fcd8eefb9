#include "kernels/cpu/cpu_backend.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "kernels/cpu/adamw.hpp"
#include "kernels/cpu/argmax.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/attention_merge.hpp"
#include "kernels/bf16.hpp"
#include "kernels/fp16.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/host_op_profiler.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/squared_relu.hpp"
#include "kernels/cpu/grad_clip.hpp"
#include "kernels/cpu/layer_norm.hpp"
#include "kernels/cpu/fp8.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/moe_routing.hpp"
#include "kernels/cpu/qkv_layout.hpp"
#include "kernels/cpu/rms_norm.hpp"
#include "kernels/cpu/rotary.hpp"
#include "kernels/cpu/swiglu.hpp"

namespace mgt {
namespace {

// Cache-line alignment keeps vectorised loops and BLAS on their fast paths.
constexpr size_t kAlignment = 64;

// Smallest pieces worth a thread: about 32k floats of element-wise work, or rows of a wide
// operation (norms) in groups that large.
constexpr int64_t kElementGrain = 1 << 15;
int64_t row_grain(int64_t row_length) { return std::max<int64_t>(1, kElementGrain / std::max<int64_t>(row_length, 1)); }

}  // namespace

CpuBackend::~CpuBackend() {
  if (profiler_ != nullptr) std::fputs(profiler_->report().c_str(), stderr);
}

void CpuBackend::start_profile(std::string timeline) {
  profiler_ = std::make_unique<cpu::HostOpProfiler>(std::move(timeline));
}

void CpuBackend::set_profiling(bool on) {
  if (profiler_ != nullptr) profiler_->set_active(on);
}

void* CpuBackend::do_allocate(size_t bytes) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* data = std::aligned_alloc(kAlignment, rounded);
  if (data == nullptr) throw std::bad_alloc();
  // All-ones bytes are a NaN in every float and -1 as an index: reading memory that no
  // operation has written then shows up in results instead of passing silently as zeros.
  std::memset(data, 0xFF, rounded);
  return data;
}

void CpuBackend::do_free(void* data, size_t /*bytes*/) noexcept { std::free(data); }

void CpuBackend::do_copy_from_host(const void* host, void* device, size_t bytes) {
  std::memcpy(device, host, bytes);
}

void CpuBackend::do_copy_to_host(const void* device, void* host, size_t bytes) {
  std::memcpy(host, device, bytes);
}

void CpuBackend::do_copy(ConstFloatArg src, FloatArg dst, int64_t n) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::copy);
  std::copy_n(src.data(), n, dst.data());
}

void CpuBackend::do_convert(ConstFloatView src, FloatView dst) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::convert);
  const int64_t n = src.size();
  if (src.type() == dst.type()) {
    std::memcpy(dst.raw(), src.raw(), static_cast<size_t>(src.bytes()));
    return;
  }
  // Through fp32: every conversion is exact or one rounding, as on the GPU.
  const auto to_float = [&](int64_t i) {
    if (src.type() == FloatType::kF32) return src.data()[i];
    const uint16_t h = static_cast<const uint16_t*>(src.raw())[i];
    return src.type() == FloatType::kBf16 ? bf16_to_float(h) : fp16_to_float(h);
  };
  if (dst.type() == FloatType::kF32) {
    float* to = dst.data();
    for (int64_t i = 0; i < n; ++i) to[i] = to_float(i);
    return;
  }
  auto* to = static_cast<uint16_t*>(dst.raw());
  const bool bf16 = dst.type() == FloatType::kBf16;
  for (int64_t i = 0; i < n; ++i) to[i] = bf16 ? float_to_bf16(to_float(i)) : float_to_fp16(to_float(i));
}

void CpuBackend::do_fill(FloatArg x, int64_t n, float value) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::fill);
  std::fill_n(x.data(), n, value);
}

void CpuBackend::do_linear_forward(ConstFloatArg x, ConstFloatArg w, ConstFloatArg bias, int64_t rows,
                                   int64_t in, int64_t out, FloatArg y) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::linear_forward);
  cpu::linear_forward(x, w, bias, rows, in, out, y);
}

void CpuBackend::do_linear_backward_input(ConstFloatArg dy, ConstFloatArg w, int64_t rows, int64_t in,
                                          int64_t out, FloatArg dx) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::linear_backward_input);
  cpu::linear_backward_input(dy, w, rows, in, out, dx);
}

void CpuBackend::do_linear_backward_weight(ConstFloatArg dy, ConstFloatArg x, int64_t rows,
                                           int64_t in, int64_t out, FloatArg dw, bool accumulate) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::linear_backward_weight);
  cpu::linear_backward_weight(dy, x, rows, in, out, dw, accumulate);
}

void CpuBackend::do_bias_backward(ConstFloatArg dy, int64_t rows, int64_t cols, FloatArg dbias, bool accumulate) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::bias_backward);
  cpu::bias_backward(dy, rows, cols, dbias, accumulate);
}

void CpuBackend::do_linear_forward_fp64(ConstFloatArg x, ConstFloatArg w, int64_t rows, int64_t in, int64_t out,
                                        FloatArg y) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::linear_forward_fp64);
  cpu::linear_forward_fp64(x, w, rows, in, out, y);
}

void CpuBackend::do_linear_backward_fp64(ConstFloatArg dy, ConstFloatArg x, ConstFloatArg w, int64_t rows,
                                         int64_t in, int64_t out, FloatArg dx, FloatArg dw, bool accumulate) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::linear_backward_fp64);
  cpu::linear_backward_fp64(dy, x, w, rows, in, out, dx, dw, accumulate);
}

void CpuBackend::do_fp8_quantize(ConstFloatArg x, int64_t rows, int64_t cols, const Fp8Scaling& scaling,
                                 Fp8View rowwise, Fp8View transposed) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::fp8_quantize);
  const int64_t n = rows * cols;
  const float amax = cpu::absolute_max(x, n);
  if (scaling.current) {
    *scaling.amax.data() = amax;
    *scaling.scale.data() = fp8_current_scale(amax, rowwise.empty() ? transposed.format : rowwise.format);
  } else if (!scaling.amax.empty()) {
    // A NaN amax is kept (as the GPU's integer maximum keeps it): the update then keeps the scale.
    float& recorded = *scaling.amax.data();
    recorded = std::isnan(amax) ? amax : std::fmax(recorded, amax);
  }
  const float scale = *scaling.scale.data();
  for (const Fp8View& out : {rowwise, transposed}) {
    if (!out.empty()) *out.scale_inv.data() = 1.0f / scale;
  }
  if (!rowwise.empty() && !transposed.empty() && rowwise.format != transposed.format)
    throw Error("Backend::fp8_quantize: rowwise and transposed copies must have one format");
  const Fp8Format format = rowwise.empty() ? transposed.format : rowwise.format;
  cpu::fp8_cast(x, rows, cols, scale, format, rowwise.empty() ? nullptr : rowwise.codes.data(),
                transposed.empty() ? nullptr : transposed.codes.data());
}

void CpuBackend::do_fp8_linear(ConstFp8View x, ConstFp8View w, ConstFloatArg bias, int64_t rows, int64_t in,
                               int64_t out, FloatArg y, bool accumulate, Fp8GemmRole /*role*/) {
  // Exact products summed in fp32, whatever the role: no narrower accumulator to emulate.
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::fp8_linear);
  std::vector<float> xs(static_cast<size_t>(rows * in));
  std::vector<float> ws(static_cast<size_t>(out * in));
  cpu::fp8_dequantize(x.codes.data(), rows * in, x.format, *x.scale_inv.data(), xs.data());
  cpu::fp8_dequantize(w.codes.data(), out * in, w.format, *w.scale_inv.data(), ws.data());
  if (!accumulate) {
    cpu::linear_forward(xs.data(), ws.data(), bias, rows, in, out, y);
    return;
  }
  std::vector<float> product(static_cast<size_t>(rows * out));
  cpu::linear_forward(xs.data(), ws.data(), bias, rows, in, out, product.data());
  float* const acc = y;
  for (int64_t i = 0; i < rows * out; ++i) acc[i] += product[static_cast<size_t>(i)];
}

void CpuBackend::do_fp8_scaling_update(FloatView history, FloatView scale, int64_t tensors, int64_t history_len,
                                       Fp8AmaxAlgo algo, float scaled_max) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::fp8_scaling_update);
  fp8_delayed_scaling_update({history.data(), static_cast<size_t>(history.size())},
                             {scale.data(), static_cast<size_t>(scale.size())}, tensors, history_len, algo,
                             scaled_max);
}

void CpuBackend::do_layer_norm_forward(ConstFloatArg x, ConstFloatArg weight, ConstFloatArg bias,
                                       int64_t rows, int64_t hidden, float eps, FloatArg y,
                                       FloatArg mean, FloatArg rstd) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::layer_norm_forward);
  parallel(rows, row_grain(hidden), [&](int64_t b, int64_t e) {
    cpu::layer_norm_forward(x + b * hidden, weight, bias, e - b, hidden, eps, y + b * hidden, mean + b, rstd + b);
  });
}

void CpuBackend::do_layer_norm_backward(ConstFloatArg dy, ConstFloatArg x, ConstFloatArg weight,
                                        ConstFloatArg mean, ConstFloatArg rstd, int64_t rows,
                                        int64_t hidden, FloatArg dx, FloatArg dweight, FloatArg dbias,
                                        bool accumulate_dx, bool accumulate_params) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::layer_norm_backward);
  if (!accumulate_params) {
    for (float* out : {static_cast<float*>(dweight), static_cast<float*>(dbias)})
      if (out != nullptr) std::fill(out, out + hidden, 0.0f);
  }
  cpu::layer_norm_backward(dy, x, weight, mean, rstd, rows, hidden, dx, dweight, dbias, accumulate_dx);
}

void CpuBackend::do_rms_norm_forward(ConstFloatArg x, ConstFloatArg weight, int64_t rows,
                                     int64_t hidden, float eps, FloatArg y, FloatArg rstd) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::rms_norm_forward);
  parallel(rows, row_grain(hidden), [&](int64_t b, int64_t e) {
    cpu::rms_norm_forward(x + b * hidden, weight, e - b, hidden, eps, y + b * hidden, rstd + b);
  });
}

void CpuBackend::do_rms_norm_backward(ConstFloatArg dy, ConstFloatArg x, ConstFloatArg weight,
                                      ConstFloatArg rstd, int64_t rows, int64_t hidden, FloatArg dx,
                                      FloatArg dweight, bool accumulate_dx, bool accumulate_params) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::rms_norm_backward);
  if (!accumulate_params) std::fill(static_cast<float*>(dweight), static_cast<float*>(dweight) + hidden, 0.0f);
  cpu::rms_norm_backward(dy, x, weight, rstd, rows, hidden, dx, dweight, accumulate_dx);
}

void CpuBackend::do_gelu_forward(ConstFloatArg x, int64_t n, FloatArg y) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::gelu_forward);
  parallel(n, kElementGrain, [&](int64_t b, int64_t e) { cpu::gelu_forward(x + b, e - b, y + b); });
}

void CpuBackend::do_gelu_backward(ConstFloatArg dy, ConstFloatArg x, int64_t n, FloatArg dx) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::gelu_backward);
  parallel(n, kElementGrain, [&](int64_t b, int64_t e) { cpu::gelu_backward(dy + b, x + b, e - b, dx + b); });
}

void CpuBackend::do_squared_relu_forward(ConstFloatArg x, int64_t n, FloatArg y) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::squared_relu_forward);
  parallel(n, kElementGrain, [&](int64_t b, int64_t e) { cpu::squared_relu_forward(x + b, e - b, y + b); });
}

void CpuBackend::do_squared_relu_backward(ConstFloatArg dy, ConstFloatArg x, int64_t n, FloatArg dx) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::squared_relu_backward);
  parallel(n, kElementGrain,
           [&](int64_t b, int64_t e) { cpu::squared_relu_backward(dy + b, x + b, e - b, dx + b); });
}

void CpuBackend::do_gelu_tanh_forward(ConstFloatArg x, int64_t n, FloatArg y) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::gelu_tanh_forward);
  parallel(n, kElementGrain, [&](int64_t b, int64_t e) { cpu::gelu_tanh_forward(x + b, e - b, y + b); });
}

void CpuBackend::do_gelu_tanh_backward(ConstFloatArg dy, ConstFloatArg x, int64_t n, FloatArg dx) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::gelu_tanh_backward);
  parallel(n, kElementGrain,
           [&](int64_t b, int64_t e) { cpu::gelu_tanh_backward(dy + b, x + b, e - b, dx + b); });
}

void CpuBackend::do_swiglu_forward(ConstFloatArg x, int64_t rows, int64_t ffn, FloatArg y) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::swiglu_forward);
  parallel(rows, row_grain(ffn),
           [&](int64_t b, int64_t e) { cpu::swiglu_forward(x + 2 * ffn * b, e - b, ffn, y + ffn * b); });
}

void CpuBackend::do_swiglu_backward(ConstFloatArg dy, ConstFloatArg x, int64_t rows, int64_t ffn,
                                    FloatArg dx) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::swiglu_backward);
  parallel(rows, row_grain(ffn), [&](int64_t b, int64_t e) {
    cpu::swiglu_backward(dy + ffn * b, x + 2 * ffn * b, e - b, ffn, dx + 2 * ffn * b);
  });
}

void CpuBackend::do_dropout_forward(ConstFloatArg x, int64_t n, float p, DropoutKey key, FloatArg y) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::dropout_forward);
  parallel(n, kElementGrain, [&](int64_t b, int64_t e) {
    DropoutKey part = key;
    part.offset += static_cast<uint64_t>(b);  // masks are a function of the element's global index
    cpu::dropout_forward(x + b, e - b, p, part, y + b);
  });
}

void CpuBackend::do_uniform_jitter(ConstFloatArg x, int64_t n, float eps, DropoutKey key, FloatArg y) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::uniform_jitter);
  parallel(n, kElementGrain, [&](int64_t b, int64_t e) {
    DropoutKey part = key;
    part.offset += static_cast<uint64_t>(b);
    cpu::uniform_jitter(x + b, e - b, eps, part, y + b);
  });
}

void CpuBackend::do_standard_normal(int64_t n, DropoutKey key, FloatArg y) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::standard_normal);
  parallel(n, kElementGrain, [&](int64_t b, int64_t e) {
    DropoutKey part = key;
    part.offset += static_cast<uint64_t>(b);
    cpu::standard_normal(e - b, part, y + b);
  });
}

void CpuBackend::do_dropout_backward(ConstFloatArg dy, int64_t n, float p, DropoutKey key,
                                     FloatArg dx) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::dropout_backward);
  parallel(n, kElementGrain, [&](int64_t b, int64_t e) {
    DropoutKey part = key;
    part.offset += static_cast<uint64_t>(b);
    cpu::dropout_backward(dy + b, e - b, p, part, dx + b);
  });
}

void CpuBackend::do_embedding_forward(const int64_t* ids, int64_t n, ConstFloatArg table,
                                      int64_t vocab_start, int64_t local_rows, int64_t hidden,
                                      FloatArg out) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::embedding_forward);
  parallel(n, row_grain(hidden), [&](int64_t b, int64_t e) {
    cpu::embedding_forward(ids + b, e - b, table, vocab_start, local_rows, hidden, out + b * hidden);
  });
}

void CpuBackend::do_embedding_backward(const int64_t* ids, int64_t n, ConstFloatArg dout,
                                       int64_t vocab_start, int64_t local_rows, int64_t hidden,
                                       FloatArg dtable) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::embedding_backward);
  cpu::embedding_backward(ids, n, dout, vocab_start, local_rows, hidden, dtable);
}

void CpuBackend::do_rotary_forward(ConstFloatArg x, const HeadTensor& shape,
                                   const RotaryParams& params, FloatArg y) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::rotary_forward);
  cpu::rotary_forward(x, shape, params, y);
}

void CpuBackend::do_rotary_backward(ConstFloatArg dy, const HeadTensor& shape,
                                    const RotaryParams& params, FloatArg dx) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::rotary_backward);
  cpu::rotary_backward(dy, shape, params, dx);
}

void CpuBackend::do_attention_forward(ConstFloatArg q, ConstFloatArg k, ConstFloatArg v,
                                      const AttentionShape& shape, const AttentionParams& params,
                                      FloatArg out, FloatArg lse) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::attention_forward);
  // One (batch, head) pair per task on the pool, each head's GEMMs on its own thread.
  const cpu::SingleThreadedBlas blas;
  parallel(shape.batch * shape.heads, 1, [&](int64_t b, int64_t e) {
    cpu::attention_forward(q, k, v, shape, params, out, lse, b, e);
  });
}

void CpuBackend::do_attention_backward(ConstFloatArg q, ConstFloatArg k, ConstFloatArg v,
                                       ConstFloatArg out, ConstFloatArg dout, ConstFloatArg lse,
                                       const AttentionShape& shape, const AttentionParams& params,
                                       FloatArg dq, FloatArg dk, FloatArg dv) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::attention_backward);
  const cpu::SingleThreadedBlas blas;
  parallel(shape.batch * shape.groups, 1, [&](int64_t b, int64_t e) {
    cpu::attention_backward(q, k, v, out, dout, lse, shape, params, dq, dk, dv, b, e);
  });
}

void CpuBackend::do_qkv_split(ConstFloatArg mixed, int64_t tokens, int64_t heads, int64_t groups,
                              int64_t unit, FloatArg q, FloatArg k, FloatArg v) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::qkv_split);
  cpu::qkv_split(mixed, tokens, heads, groups, unit, q, k, v);
}

void CpuBackend::do_qkv_merge(ConstFloatArg q, ConstFloatArg k, ConstFloatArg v, int64_t tokens,
                              int64_t heads, int64_t groups, int64_t unit, FloatArg mixed) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::qkv_merge);
  cpu::qkv_merge(q, k, v, tokens, heads, groups, unit, mixed);
}

void CpuBackend::do_cross_entropy_shard_statistics(ConstFloatArg logits, const int64_t* targets,
                                                   int64_t rows, int64_t vocab, int64_t vocab_start,
                                                   FloatArg statistics) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::cross_entropy_shard_statistics);
  parallel(rows, row_grain(vocab), [&](int64_t b, int64_t e) {
    cpu::cross_entropy_shard_statistics(logits + b * vocab, targets + b, e - b, vocab, vocab_start,
                                        statistics + b, statistics + rows + b,
                                        statistics + 2 * rows + b);
  });
}

void CpuBackend::do_cross_entropy_combine(ConstFloatArg statistics, int64_t ranks, int64_t rows,
                                          FloatArg loss, FloatArg row_max, FloatArg sum_exp) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::cross_entropy_combine);
  cpu::cross_entropy_combine(statistics, ranks, rows, loss, row_max, sum_exp);
}

void CpuBackend::do_cross_entropy_forward(ConstFloatArg logits, const int64_t* targets, int64_t rows,
                                          int64_t vocab, FloatArg loss, FloatArg row_max,
                                          FloatArg sum_exp) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::cross_entropy_forward);
  parallel(rows, row_grain(vocab), [&](int64_t b, int64_t e) {
    cpu::cross_entropy_forward(logits + b * vocab, targets + b, e - b, vocab, loss + b, row_max + b, sum_exp + b);
  });
}

void CpuBackend::do_cross_entropy_backward(ConstFloatArg logits, const int64_t* targets,
                                           ConstFloatArg row_max, ConstFloatArg sum_exp,
                                           ConstFloatArg dloss, int64_t rows, int64_t vocab,
                                           int64_t vocab_start, FloatArg dlogits) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::cross_entropy_backward);
  parallel(rows, row_grain(vocab), [&](int64_t b, int64_t e) {
    cpu::cross_entropy_backward(logits + b * vocab, targets + b, row_max + b, sum_exp + b, dloss + b, e - b, vocab,
                                vocab_start, dlogits + b * vocab);
  });
}

MaskedLossSum CpuBackend::do_masked_loss_sum(ConstFloatArg loss, ConstFloatArg loss_mask,
                                             int64_t rows) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::masked_loss_sum);
  return cpu::masked_loss_sum(loss, loss_mask, rows);
}

void CpuBackend::do_row_argmax(ConstFloatArg x, int64_t rows, int64_t cols, int64_t row_stride,
                               int64_t* out) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::row_argmax);
  parallel(rows, row_grain(cols), [&](int64_t b, int64_t e) {
    cpu::row_argmax(x + b * row_stride, e - b, cols, out + b, row_stride);
  });
}

void CpuBackend::do_masked_loss_grad(ConstFloatArg loss_mask, int64_t rows, float scale,
                                     FloatArg dloss) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::masked_loss_grad);
  cpu::masked_loss_grad(loss_mask, rows, scale, dloss);
}

void CpuBackend::do_add_bias(FloatArg y, ConstFloatArg bias, int64_t rows, int64_t cols) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::add_bias);
  cpu::add_bias(y, bias, rows, cols);
}

void CpuBackend::do_add(ConstFloatArg a, ConstFloatArg b, ConstFloatArg c, int64_t n, FloatArg out) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::add);
  cpu::add(a, b, c, n, out);
}

void CpuBackend::do_attention_merge(ConstFloatArg part_out, ConstFloatArg part_lse, const HeadTensor& whole,
                                    int64_t first_row, int64_t part_rows, FloatArg out, FloatArg lse) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::attention_merge);
  cpu::attention_merge(part_out, part_lse, whole, first_row, part_rows, out, lse);
}

void CpuBackend::do_accumulate(FloatArg y, ConstFloatArg x, int64_t n) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::accumulate);
  cpu::accumulate(y, x, n);
}

// The routing runs on one thread: its column passes (capacity, the auxiliary loss's sums) cross
// the rows, and its cost is small beside the experts' GEMMs.
void CpuBackend::do_moe_route(ConstFloatArg logits, const MoeRoutingParams& p, FloatArg gates, FloatArg probs,
                              FloatArg routing_map, FloatArg aux_counts, double* statistics, bool accumulate) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::moe_route);
  cpu::moe_route(logits, p, gates, probs, routing_map, aux_counts, statistics, accumulate);
}

void CpuBackend::do_moe_route_backward(ConstFloatArg logits, const MoeRoutingParams& p, ConstFloatArg d_probs,
                                       ConstFloatArg routing_map, ConstFloatArg aux_counts, float aux_grad,
                                       float z_grad, FloatArg d_logits) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::moe_route_backward);
  cpu::moe_route_backward(logits, p, d_probs, routing_map, aux_counts, aux_grad, z_grad, d_logits);
}

void CpuBackend::do_moe_sinkhorn(ConstFloatArg logits, int64_t tokens, int64_t experts, FloatArg out) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::moe_sinkhorn);
  cpu::moe_sinkhorn(logits, tokens, experts, out);
}

void CpuBackend::do_gather_rows(ConstFloatArg in, int64_t in_rows, int64_t cols, const int64_t* index,
                                int64_t out_rows, ConstFloatArg weights, FloatArg out) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::gather_rows);
  const float* w = weights;
  parallel(out_rows, row_grain(cols), [&](int64_t b, int64_t e) {
    cpu::gather_rows(in, in_rows, cols, index + b, e - b, w ? w + b : nullptr, static_cast<float*>(out) + b * cols);
  });
}

void CpuBackend::do_gather_sum_rows(ConstFloatArg in, int64_t in_rows, int64_t cols, const int64_t* index,
                                    int64_t out_rows, int64_t k, ConstFloatArg weights, FloatArg out) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::gather_sum_rows);
  parallel(out_rows, row_grain(cols * k), [&](int64_t b, int64_t e) {
    cpu::gather_sum_rows(in, in_rows, cols, index + b * k, e - b, k, weights, static_cast<float*>(out) + b * cols);
  });
}

void CpuBackend::do_row_dot(ConstFloatArg a, ConstFloatArg b, int64_t rows, int64_t cols, FloatArg out) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::row_dot);
  parallel(rows, row_grain(cols), [&](int64_t first, int64_t end) {
    cpu::row_dot(static_cast<const float*>(a) + first * cols, static_cast<const float*>(b) + first * cols,
                 end - first, cols, static_cast<float*>(out) + first);
  });
}

void CpuBackend::do_scale_rows(ConstFloatArg x, ConstFloatArg factors, int64_t rows, int64_t cols, FloatArg out) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::scale_rows);
  parallel(rows, row_grain(cols), [&](int64_t first, int64_t end) {
    cpu::scale_rows(static_cast<const float*>(x) + first * cols, static_cast<const float*>(factors) + first,
                    end - first, cols, static_cast<float*>(out) + first * cols);
  });
}

void CpuBackend::do_scale(FloatArg x, int64_t n, float factor) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::scale);
  cpu::scale(x, n, factor);
}

void CpuBackend::do_adamw_step(FloatArg param, ConstFloatArg grad, FloatArg exp_avg, FloatArg exp_avg_sq,
                               int64_t n, const AdamWParams& params, int64_t step) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::adamw_step);
  parallel(n, kElementGrain, [&](int64_t b, int64_t e) {
    cpu::adamw_step(param + b, grad + b, exp_avg + b, exp_avg_sq + b, e - b, params, step);
  });
}

double CpuBackend::do_sum_of_squares(ConstFloatArg x, int64_t n) {
  const cpu::ScopedHostOp profiled(profiler_.get(), BackendOp::sum_of_squares);
  const std::span<const float> buffer(x.data(), static_cast<size_t>(n));
  return cpu::sum_of_squares(std::span<const std::span<const float>>(&buffer, 1));
}

}  // namespace mgt
