#include "kernels/cuda/cuda_backend.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "kernels/backend_factory.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/attention_merge.hpp"
#include "kernels/cuda/bf16_convert.hpp"
#include "kernels/cuda/cached_attention.hpp"
#include "kernels/cuda/copy_ranges.hpp"
#include "kernels/cuda/cross_entropy.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/cuda/cuda_event.hpp"
#include "kernels/cuda/cuda_graph.hpp"
#include "kernels/cuda/cudnn_attention.hpp"
#include "kernels/cuda_device.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/embedding_backward.hpp"
#include "kernels/cuda/fp8_gemm.hpp"
#include "kernels/cuda/fp8_quantize.hpp"
#include "kernels/cuda/fp8_scaling.hpp"
#include "kernels/cuda/fp8_transpose.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/grouped_linear_hopper.hpp"
#include "kernels/cuda/layout.hpp"
#include "kernels/cuda/linear_fp64.hpp"
#include "kernels/cuda/moe_permutation.hpp"
#include "kernels/cuda/moe_routing.hpp"
#include "kernels/cuda/norms.hpp"
#include "kernels/cuda/op_profiler.hpp"
#include "kernels/cuda/optimizer.hpp"
#include "kernels/cuda/small_rows_linear.hpp"

namespace mgt {

namespace {

// Streams for a grouped linear layer's GEMMs (cuda/gemm_lanes.hpp).
constexpr int kGroupedGemmLanes = 4;

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device, const BackendOptions& options) {
  return std::make_unique<CudaBackend>(device, options);
}

CudaBackend::CudaBackend(int device, const BackendOptions& options)
    : device_(device), profile_gemms_(options.profile_gemms) {
  MGT_CUDA_CHECK(cudaSetDevice(device));
  // Freed blocks stay in the device's default pool for reuse: after the first step, allocation
  // is a pool lookup, never a cudaMalloc.
  cudaMemPool_t pool = nullptr;
  MGT_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  uint64_t keep_everything = UINT64_MAX;
  MGT_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
  MGT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  MGT_CUBLAS_CHECK(cublasCreate(&cublas_));
  MGT_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  // Full fp32 GEMMs: TF32 would put the fp32 path outside its bound against the CPU.
  MGT_CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_PEDANTIC_MATH));
  main_lt_ = std::make_unique<cuda::LtMatmul>(stream_, profile_gemms_);
  lt_ = main_lt_.get();
  gemm_lanes_ = std::make_unique<cuda::GemmLanes>(stream_, kGroupedGemmLanes, profile_gemms_);
  MGT_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&reduction_), 2 * sizeof(double), stream_));
  if (options.profile) profiler_ = std::make_unique<cuda::OpProfiler>(stream_, options.profile_timeline);
}

CudaBackend::~CudaBackend() {
  if (profiler_ != nullptr) {
    try {
      std::fputs(profiler_->report().c_str(), stderr);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "--profile: %s\n", e.what());
    }
    profiler_.reset();
  }
  // Teardown errors cannot be reported from a destructor; the process is ending anyway.
  cudnn_attention_.reset();  // frees its plans and scratch on the stream, which must still exist
  gemm_lanes_.reset();
  lt_ = nullptr;
  main_lt_.reset();
  segments_device_ = DeviceIndexBuffer();  // freed on the stream too, before it goes
  if (reduction_ != nullptr) cudaFreeAsync(reduction_, stream_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
}

std::string CudaBackend::description() const {
  const bool narrow = matmul_precision_ != MatmulPrecision::kFp32;
  const std::string type = float_type_name(activation_type_);
  return name() + " " + cuda::device_description(device_) +
         (narrow ? ", " + type + " weights and activations (fp32 master weights, gradients and optimizer "
                   "state), " + type + " GEMMs with fp32 accumulation"
                 : std::string(", fp32 storage, fp32 GEMMs")) +
         " (cuBLAS), " +
         (narrow && !deterministic_ && cuda::CudnnAttention::built()
              ? type + " cuDNN fused attention (fp32 flash-style kernel where cuDNN does not apply)"
              : std::string("fp32 flash-style attention kernel")) +
         (deterministic_ ? ", deterministic kernels only" : "");
}

std::optional<AvailableMemory> CudaBackend::available_memory() const {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  MGT_CUDA_CHECK(cudaSetDevice(device_));
  MGT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return AvailableMemory{static_cast<std::int64_t>(free_bytes), "free memory of " + name()};
}

std::optional<Backend::MemoryUse> CudaBackend::memory_use() const {
  cudaMemPool_t pool = nullptr;
  MGT_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device_));
  const auto read = [&](cudaMemPoolAttr attribute) {
    uint64_t value = 0;
    MGT_CUDA_CHECK(cudaMemPoolGetAttribute(pool, attribute, &value));
    return static_cast<int64_t>(value);
  };
  // The shareable allocations live as long as the model: their peak and the pool's add up.
  return MemoryUse{read(cudaMemPoolAttrUsedMemCurrent) + shareable_bytes_,
                   read(cudaMemPoolAttrUsedMemHigh) + max_shareable_bytes_,
                   read(cudaMemPoolAttrReservedMemCurrent) + shareable_bytes_,
                   read(cudaMemPoolAttrReservedMemHigh) + max_shareable_bytes_};
}

bool CudaBackend::set_matmul_precision(MatmulPrecision precision) {
  matmul_precision_ = precision;
  activation_type_ = precision == MatmulPrecision::kBf16   ? FloatType::kBf16
                     : precision == MatmulPrecision::kFp16 ? FloatType::kF16
                                                           : FloatType::kF32;
  return true;
}

void CudaBackend::set_deterministic(bool deterministic) {
  if (deterministic == deterministic_) return;
  deterministic_ = deterministic;
  // Timing may pick another algorithm, with other rounding, on each run: deterministic mode
  // takes the heuristic's choice, the same every time.
  main_lt_ = std::make_unique<cuda::LtMatmul>(stream_, profile_gemms_);
  lt_ = main_lt_.get();
  lt_->set_timed_choice(!deterministic_);
  gemm_lanes_->set_timed_choice(!deterministic_);
}

int64_t CudaBackend::side_by_side_lanes() const { return gemm_lanes_->lanes(); }

void CudaBackend::side_by_side(std::span<const int64_t> weight,
                               const std::function<void(int64_t lane, int64_t item)>& f) {
  if (profiler_ || beside_) {
    Backend::side_by_side(weight, f);
    return;
  }
  gemm_lanes_->run(*main_lt_, weight, [&](const cuda::GemmLanes::Lane& lane, int64_t item) {
    // The lane's stream and cuBLASLt for the item's operations (and its stream-ordered
    // allocations), the caller's again after it, also when it throws.
    struct Restore {
      CudaBackend& b;
      cudaStream_t stream;
      ~Restore() {
        b.stream_ = stream;
        b.lt_ = b.main_lt_.get();
        b.beside_ = false;
        cublasSetStream(b.cublas_, stream);
      }
    } restore{*this, stream_};
    stream_ = lane.stream;
    lt_ = &lane.lt;
    beside_ = true;
    MGT_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    f(lane.index, item);
  });
}

bool CudaBackend::takes_natively(BackendOp op, FloatType /*type*/) const {
  // Every operation on activations reads and writes bf16 and fp16 storage natively; the
  // optimizer's, the loss statistics' and the gradient norm's operands are fp32 anyway.
  switch (op) {
    case BackendOp::masked_loss_sum:
    case BackendOp::masked_loss_grad:
    case BackendOp::cross_entropy_combine:
    case BackendOp::adamw_step:
    case BackendOp::sum_of_squares:
    case BackendOp::attention_merge:  // fp32 kernel: the merge's exponentials want the range
    // The MoE routing is in fp32 kernels (kernels/cuda/moe_routing.hpp): under bf16 or fp16
    // storage the public call hands them fp32 copies. (Its row gathers take every type.)
    case BackendOp::moe_route:
    case BackendOp::moe_route_backward:
      return false;
    default:
      return true;
  }
}

void CudaBackend::synchronize() {
  if (profiler_ == nullptr) {
    MGT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  MGT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  profiler_->add_host_wait(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
}

void CudaBackend::set_profiling(bool on) {
  if (profiler_ != nullptr) profiler_->set_active(on);
}

std::unique_ptr<RecordedOperations> CudaBackend::record(const std::function<void()>& run) {
  if (profiler_ != nullptr) return nullptr;
  return cuda::record_graph(stream_, run, recording_);
}

void* CudaBackend::do_allocate(size_t bytes) {
  // A graph would keep the block for its replays while the pool hands it out again.
  if (recording_) throw Error("an allocation cannot be recorded");
  void* data = nullptr;
  MGT_CUDA_CHECK(cudaMallocAsync(&data, bytes, stream_));
  // All-ones bytes, as on the CPU backend: a NaN in every float, so reading memory that no
  // operation has written shows up in results instead of passing as zeros.
  MGT_CUDA_CHECK(cudaMemsetAsync(data, 0xFF, bytes, stream_));
  return data;
}

void CudaBackend::do_free(void* data, size_t /*bytes*/) noexcept { cudaFreeAsync(data, stream_); }

void* CudaBackend::do_allocate_shareable(size_t bytes) {
  if (recording_) throw Error("an allocation cannot be recorded");
  // cudaIpcGetMemHandle takes cudaMalloc's allocations, not the stream-ordered pool's blocks.
  void* data = nullptr;
  MGT_CUDA_CHECK(cudaMalloc(&data, bytes));
  MGT_CUDA_CHECK(cudaMemsetAsync(data, 0xFF, bytes, stream_));
  shareable_bytes_ += static_cast<int64_t>(bytes);
  max_shareable_bytes_ = std::max(max_shareable_bytes_, shareable_bytes_);
  return data;
}

void CudaBackend::do_free_shareable(void* data, size_t bytes) noexcept {
  // cudaFree does not wait for this stream's queued work that may still use the memory.
  cudaStreamSynchronize(stream_);
  cudaFree(data);
  shareable_bytes_ -= static_cast<int64_t>(bytes);
}

void CudaBackend::do_copy_from_host(const void* host, void* device, size_t bytes) {
  // Synchronous with respect to the host buffer: the caller may reuse it at once.
  MGT_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_));
  synchronize();
}

void* CudaBackend::do_allocate_pinned(size_t bytes) {
  void* data = nullptr;
  MGT_CUDA_CHECK(cudaMallocHost(&data, bytes));
  return data;
}

void CudaBackend::do_free_pinned(void* data, size_t /*bytes*/) noexcept {
  // A queued copy may still read it (staging released at teardown or when it grows): rare, so
  // the wait costs nothing in a step.
  cudaStreamSynchronize(stream_);
  cudaFreeHost(data);
}

namespace {

// From pageable memory an asynchronous copy goes through a staging buffer and is not
// asynchronous as the caller expects (it could read the memory after returning, or block):
// refused, so that the contract cannot be broken silently.
void require_pinned(const void* host, const char* op) {
  cudaPointerAttributes attributes{};
  MGT_CUDA_CHECK(cudaPointerGetAttributes(&attributes, host));
  if (attributes.type != cudaMemoryTypeHost)
    throw Error(std::string(op) + ": the host memory is not page-locked (take it from allocate_pinned)");
}

}  // namespace

void CudaBackend::do_copy_from_host_async(const void* host, void* device, size_t bytes) {
  require_pinned(host, "copy_from_host_async");
  MGT_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_));
}

void CudaBackend::do_copy_to_host_async(const void* device, void* host, size_t bytes) {
  require_pinned(host, "copy_to_host_async");
  MGT_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_));
}

std::unique_ptr<QueueEvent> CudaBackend::record_event() { return cuda::record_event(stream_); }

std::unique_ptr<QueueEvent> CudaBackend::record_timed_event() { return cuda::record_event(stream_, true); }

void CudaBackend::do_copy_to_host(const void* device, void* host, size_t bytes) {
  MGT_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_));
  synchronize();
}

void CudaBackend::do_copy(ConstFloatArg src, FloatArg dst, int64_t n) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::copy);
  MGT_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), static_cast<size_t>(n) * float_type_size(src.type()),
                                 cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::do_copy_ranges(ConstFloatView src, FloatView dst, std::span<const CopyRange> ranges) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::copy_ranges);
  cuda::copy_ranges(src.raw(), dst.raw(), static_cast<int>(float_type_size(src.type())), ranges.data(),
                    ranges.size(), stream_);
}

void CudaBackend::do_convert(ConstFloatView src, FloatView dst) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::convert);
  if (src.type() == dst.type()) {
    MGT_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), static_cast<size_t>(src.bytes()),
                                   cudaMemcpyDeviceToDevice, stream_));
  } else if (src.type() == FloatType::kF32 && dst.type() == FloatType::kBf16) {
    cuda::fp32_to_bf16({{src.raw(), dst.raw(), src.size()}}, stream_);
  } else if (src.type() == FloatType::kBf16 && dst.type() == FloatType::kF32) {
    cuda::bf16_to_fp32({{src.raw(), dst.raw(), src.size()}}, stream_);
  } else {
    cuda::convert(cuda::In(src), src.size(), cuda::Out(dst), stream_);
  }
}

void CudaBackend::do_fill(FloatArg x, int64_t n, float value) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::fill); cuda::fill(x, n, value, stream_); }

void CudaBackend::do_fp8_quantize(ConstFloatArg x, int64_t rows, int64_t cols, const Fp8Scaling& scaling,
                                  Fp8View rowwise, Fp8View transposed) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::fp8_quantize);
  if (!rowwise.empty() && !transposed.empty() && rowwise.format != transposed.format)
    throw Error("fp8_quantize: rowwise and transposed copies must have one format");
  const Fp8Format format = rowwise.empty() ? transposed.format : rowwise.format;
  const auto output = [](Fp8View v) {
    return v.empty() ? cuda::Fp8CastOutput{} : cuda::Fp8CastOutput{v.codes.data(), v.scale_inv.data()};
  };
  cuda::fp8_quantize(x, rows, cols, scaling.scale.data(), scaling.amax.empty() ? nullptr : scaling.amax.data(),
                     scaling.current, {format == Fp8Format::kE5M2, fp8_max(format)}, output(rowwise),
                     output(transposed), stream_);
}

void CudaBackend::do_fp8_quantize_gradient(ConstFloatView dy, ConstFloatView pre, int64_t rows, int64_t cols,
                                           const Fp8Scaling& scaling, Fp8View rowwise, Fp8View transposed,
                                           FloatView dbias, FloatView dpre, bool accumulate_dbias) {
  // One pass where it applies: delayed scaling (current scaling needs max |g| before the cast),
  // both layouts of one format, an fp32 bias gradient.
  if (!scaling.current && !rowwise.empty() && !transposed.empty() && rowwise.format == transposed.format &&
      (dbias.empty() || dbias.is_fp32())) {
    const cuda::ScopedOp scope(profiler_.get(), BackendOp::fp8_quantize_gradient);
    const cuda::In p = pre.empty() ? cuda::In() : cuda::In(pre);
    const cuda::Out d = dpre.empty() ? cuda::Out() : cuda::Out(dpre);
    if (cuda::fp8_quantize_gradient(dy, p, rows, cols, scaling.scale.data(),
                                    scaling.amax.empty() ? nullptr : scaling.amax.data(),
                                    {rowwise.format == Fp8Format::kE5M2, fp8_max(rowwise.format)},
                                    {rowwise.codes.data(), rowwise.scale_inv.data()},
                                    {transposed.codes.data(), transposed.scale_inv.data()},
                                    dbias.empty() ? nullptr : static_cast<float*>(dbias.raw()), accumulate_dbias, d,
                                    stream_))
      return;
  }
  Backend::do_fp8_quantize_gradient(dy, pre, rows, cols, scaling, rowwise, transposed, dbias, dpre, accumulate_dbias);
}

void CudaBackend::do_fp8_quantize_gelu_tanh(ConstFloatView pre, int64_t rows, int64_t cols, const Fp8Scaling& scaling,
                                            Fp8View rowwise, Fp8View transposed) {
  // One pass under delayed scaling (current scaling needs max |y| before the cast) into one format.
  if (!scaling.current && (rowwise.empty() || transposed.empty() || rowwise.format == transposed.format)) {
    const cuda::ScopedOp scope(profiler_.get(), BackendOp::fp8_quantize_gelu_tanh);
    const Fp8Format format = rowwise.empty() ? transposed.format : rowwise.format;
    const auto output = [](Fp8View v) {
      return v.empty() ? cuda::Fp8CastOutput{} : cuda::Fp8CastOutput{v.codes.data(), v.scale_inv.data()};
    };
    if (cuda::fp8_quantize_gelu_tanh(pre, rows, cols, scaling.scale.data(),
                                     scaling.amax.empty() ? nullptr : scaling.amax.data(),
                                     {format == Fp8Format::kE5M2, fp8_max(format)}, output(rowwise), output(transposed),
                                     stream_))
      return;
  }
  Backend::do_fp8_quantize_gelu_tanh(pre, rows, cols, scaling, rowwise, transposed);
}

void CudaBackend::do_fp8_linear(ConstFp8View x, ConstFp8View w, ConstFloatArg bias, int64_t rows, int64_t in,
                                int64_t out, FloatArg y, bool accumulate, Fp8GemmRole role) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::fp8_linear);
  const cuda::In b = bias.empty() ? cuda::In() : cuda::In(bias);
  if (cuda::fp8_linear(*lt_, x, w, b, rows, in, out, y, accumulate, role, stream_)) return;
  // Shapes cuBLASLt's FP8 GEMMs cannot take (the small models of tests): the dequantized operands'
  // product in full fp32, bias added before the one rounding to y's type.
  DeviceBuffer xs(*this, rows * in), ws(*this, out * in), product(*this, rows * out);
  cuda::fp8_dequantize(x.codes.data(), rows * in, x.format == Fp8Format::kE5M2, x.scale_inv.data(),
                       xs.view().data(), stream_);
  cuda::fp8_dequantize(w.codes.data(), out * in, w.format == Fp8Format::kE5M2, w.scale_inv.data(),
                       ws.view().data(), stream_);
  cuda::linear_forward(cublas_, *lt_, MatmulPrecision::kFp32, xs.view(), ws.view(), cuda::In(), rows, in, out,
                       product.view());
  if (!bias.empty()) cuda::add_bias(product.view(), b, rows, out, stream_);
  if (accumulate) {
    cuda::accumulate(y, product.view(), rows * out, stream_);
  } else {
    cuda::convert(product.view(), rows * out, y, stream_);
  }
}

void CudaBackend::do_fp8_scaling_update(FloatView history, FloatView scale, int64_t tensors, int64_t history_len,
                                        Fp8AmaxAlgo algo, float scaled_max) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::fp8_scaling_update);
  cuda::fp8_scaling_update(history.data(), scale.data(), tensors, history_len, algo == Fp8AmaxAlgo::kMax,
                           scaled_max, stream_);
}

void CudaBackend::do_fp8_transpose(Fp8View x, int64_t rows, int64_t cols, ConstFloatView scale, Fp8View transposed) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::fp8_transpose);
  cuda::fp8_transpose(x.codes.data(), rows, cols, scale.data(), x.scale_inv.data(), transposed.codes.data(),
                      transposed.scale_inv.data(), stream_);
}

void CudaBackend::do_fp8_norm_forward(ConstFloatView x, ConstFloatView b, ConstFloatView c, FloatView sum,
                                      ConstFloatView weight, ConstFloatView bias, int64_t rows, int64_t hidden,
                                      float eps, const Fp8Scaling& scaling, Fp8View rowwise, FloatView mean,
                                      FloatView rstd) {
  // One pass under delayed scaling (current scaling needs max |y| before the cast), with the fp32
  // statistics add_norm_forward's kernel writes.
  if (!scaling.current && (mean.empty() || mean.is_fp32()) && rstd.is_fp32()) {
    const cuda::ScopedOp scope(profiler_.get(), BackendOp::fp8_norm_forward);
    const auto optional = [](ConstFloatView v) { return v.empty() ? cuda::In() : cuda::In(v); };
    if (cuda::fp8_norm_forward(x, optional(b), optional(c), weight, optional(bias), rows, hidden, eps,
                               sum.empty() ? cuda::Out() : cuda::Out(sum), mean.empty() ? nullptr : mean.data(),
                               rstd.data(), scaling.scale.data(), scaling.amax.empty() ? nullptr : scaling.amax.data(),
                               {rowwise.format == Fp8Format::kE5M2, fp8_max(rowwise.format)},
                               {rowwise.codes.data(), rowwise.scale_inv.data()}, stream_))
      return;
  }
  Backend::do_fp8_norm_forward(x, b, c, sum, weight, bias, rows, hidden, eps, scaling, rowwise, mean, rstd);
}

void CudaBackend::do_linear_forward(ConstFloatArg x, ConstFloatArg w, ConstFloatArg bias, int64_t rows,
                                    int64_t in, int64_t out, FloatArg y) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::linear_forward);
  if (cuda::small_rows_linear(x, w, bias.empty() ? cuda::In() : cuda::In(bias), rows, in, out, cuda::Out(), y,
                              stream_))
    return;
  if (!cuda::linear_forward(cublas_, *lt_, matmul_precision_, x, w, bias.empty() ? cuda::In() : cuda::In(bias),
                            rows, in, out, y)) {
    cuda::add_bias(y, bias, rows, out, stream_);
  }
}

void CudaBackend::do_linear_forward_fp64(ConstFloatArg x, ConstFloatArg w, int64_t rows, int64_t in, int64_t out,
                                         FloatArg y) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::linear_forward_fp64);
  cuda::linear_forward_fp64(x, w, rows, in, out, y, stream_);
}

void CudaBackend::do_linear_backward_fp64(ConstFloatArg dy, ConstFloatArg x, ConstFloatArg w, int64_t rows,
                                          int64_t in, int64_t out, FloatArg dx, FloatArg dw, bool accumulate) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::linear_backward_fp64);
  if (!dx.empty()) cuda::linear_backward_input_fp64(dy, w, rows, in, out, dx, stream_);
  DeviceArray<double> partial(*this, cuda::weight_gradient_fp64_chunks(rows) * out * in);
  cuda::linear_backward_weight_fp64(dy, x, rows, in, out, dw, accumulate, partial.view().data(), stream_);
}

void CudaBackend::do_linear_backward_input(ConstFloatArg dy, ConstFloatArg w, int64_t rows,
                                           int64_t in, int64_t out, FloatArg dx) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::linear_backward_input);
  cuda::linear_backward_input(cublas_, *lt_, matmul_precision_, dy, w, rows, in, out, dx);
}

void CudaBackend::do_linear_backward_weight(ConstFloatArg dy, ConstFloatArg x, int64_t rows,
                                            int64_t in, int64_t out, FloatArg dw, bool accumulate) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::linear_backward_weight);
  cuda::linear_backward_weight(cublas_, *lt_, matmul_precision_, dy, x, rows, in, out, dw, accumulate);
}

namespace {

// Whether each group's GEMM goes through cuBLASLt: 2-byte operands of one type.
bool narrow_groups(ConstFloatView a, std::span<const ConstFloatView> b) {
  return a.type() != FloatType::kF32 &&
         std::all_of(b.begin(), b.end(), [&](const ConstFloatView& v) { return v.type() == a.type(); });
}

// f(lane, g, rows, first_row) for each group g with rows, side by side on `lanes`, or one after
// another on `stream` (`sequential`: the operation itself runs on a lane of side_by_side).
template <typename F>
void for_each_group(cuda::GemmLanes& lanes, cuda::LtMatmul& lt, cudaStream_t stream, bool sequential,
                    std::span<const int64_t> group_rows, F f) {
  std::vector<int64_t> first(group_rows.size(), 0);
  for (std::size_t g = 1; g < group_rows.size(); ++g) first[g] = first[g - 1] + group_rows[g - 1];
  const auto each = [&](const cuda::GemmLanes::Lane& lane, int64_t g) {
    const auto i = static_cast<std::size_t>(g);
    f(lane, i, group_rows[i], first[i]);
  };
  if (!sequential) return lanes.run(lt, group_rows, each);
  for (std::size_t g = 0; g < group_rows.size(); ++g)
    if (group_rows[g] > 0) each(cuda::GemmLanes::Lane{lt, stream, 0}, static_cast<int64_t>(g));
}

}  // namespace

void CudaBackend::do_grouped_linear_forward(ConstFloatView x, std::span<const ConstFloatView> w,
                                            std::span<const ConstFloatView> bias, std::span<const int64_t> group_rows,
                                            int64_t in, int64_t out, FloatView y) {
  if (!bias.empty() || !narrow_groups(x, w))
    return Backend::do_grouped_linear_forward(x, w, bias, group_rows, in, out, y);
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::grouped_linear_forward);
  if (cuda::grouped_linear_forward_hopper(x, w, group_rows, in, out, y, stream_)) return;
  for_each_group(*gemm_lanes_, *lt_, stream_, beside_, group_rows,
                 [&](const cuda::GemmLanes::Lane& lane, std::size_t g, int64_t rows, int64_t r0) {
    const ConstFloatView xg = x.subspan(r0 * in, rows * in);
    const FloatView yg = y.subspan(r0 * out, rows * out);
    if (!cuda::small_rows_linear(xg, w[g], cuda::In(), rows, in, out, cuda::Out(), yg, lane.stream))
      cuda::linear_forward(cublas_, lane.lt, matmul_precision_, xg, w[g], cuda::In(), rows, in, out, yg);
  });
}

void CudaBackend::do_grouped_linear_backward_input(ConstFloatView dy, std::span<const ConstFloatView> w,
                                                   std::span<const int64_t> group_rows, int64_t in, int64_t out,
                                                   FloatView dx) {
  if (!narrow_groups(dy, w)) return Backend::do_grouped_linear_backward_input(dy, w, group_rows, in, out, dx);
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::grouped_linear_backward_input);
  if (cuda::grouped_linear_backward_input_hopper(dy, w, group_rows, in, out, dx, stream_)) return;
  for_each_group(*gemm_lanes_, *lt_, stream_, beside_, group_rows,
                 [&](const cuda::GemmLanes::Lane& lane, std::size_t g, int64_t rows, int64_t r0) {
    cuda::linear_backward_input(cublas_, lane.lt, matmul_precision_, dy.subspan(r0 * out, rows * out), w[g], rows, in,
                                out, dx.subspan(r0 * in, rows * in));
  });
}

void CudaBackend::do_grouped_linear_backward_weight(ConstFloatView dy, ConstFloatView x,
                                                    std::span<const int64_t> group_rows, int64_t in, int64_t out,
                                                    std::span<const FloatView> dw, bool accumulate) {
  if (!narrow_groups(dy, std::span<const ConstFloatView>(&x, 1)))
    return Backend::do_grouped_linear_backward_weight(dy, x, group_rows, in, out, dw, accumulate);
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::grouped_linear_backward_weight);
  if (cuda::grouped_linear_backward_weight_hopper(dy, x, group_rows, in, out, dw, accumulate, stream_)) return;
  for_each_group(*gemm_lanes_, *lt_, stream_, beside_, group_rows,
                 [&](const cuda::GemmLanes::Lane& lane, std::size_t g, int64_t rows, int64_t r0) {
    cuda::linear_backward_weight(cublas_, lane.lt, matmul_precision_, dy.subspan(r0 * out, rows * out),
                                 x.subspan(r0 * in, rows * in), rows, in, out, dw[g], accumulate);
  });
}

void CudaBackend::do_linear_gelu_tanh_forward(ConstFloatView x, ConstFloatView w, ConstFloatView bias,
                                              int64_t rows, int64_t in, int64_t out, FloatView pre,
                                              FloatView y) {
  {
    const cuda::ScopedOp scope(profiler_.get(), BackendOp::linear_gelu_tanh_forward);
    const cuda::In b = bias.empty() ? cuda::In() : cuda::In(bias);
    if (cuda::small_rows_linear(x, w, b, rows, in, out, pre, y, stream_)) return;  // decoding
    if (rows > cuda::kSmallRowsMax && cuda::linear_gelu_tanh_forward(*lt_, x, w, bias, rows, in, out, pre, y))
      return;
  }
  Backend::do_linear_gelu_tanh_forward(x, w, bias, rows, in, out, pre, y);
}

void CudaBackend::do_linear_backward_input_gelu_tanh(ConstFloatView dy, ConstFloatView w,
                                                     ConstFloatView pre, int64_t rows, int64_t in,
                                                     int64_t out, FloatView dpre) {
  {
    const cuda::ScopedOp scope(profiler_.get(), BackendOp::linear_backward_input_gelu_tanh);
    if (cuda::linear_backward_input_gelu_tanh(*lt_, dy, w, pre, rows, in, out, dpre)) return;
  }
  Backend::do_linear_backward_input_gelu_tanh(dy, w, pre, rows, in, out, dpre);
}

void CudaBackend::do_fp8_linear_gelu_tanh_forward(ConstFp8View x, ConstFp8View w, ConstFloatView bias, int64_t rows,
                                                  int64_t in, int64_t out, FloatView pre, FloatView y) {
  {
    const cuda::ScopedOp scope(profiler_.get(), BackendOp::fp8_linear_gelu_tanh_forward);
    const cuda::In b = bias.empty() ? cuda::In() : cuda::In(bias);
    if (cuda::fp8_linear_gelu_tanh_forward(*lt_, x, w, b, rows, in, out, pre, y)) return;
  }
  Backend::do_fp8_linear_gelu_tanh_forward(x, w, bias, rows, in, out, pre, y);
}

void CudaBackend::do_bias_backward(ConstFloatArg dy, int64_t rows, int64_t cols, FloatArg dbias, bool accumulate) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::bias_backward);
  cuda::bias_backward(dy, rows, cols, dbias, accumulate, stream_);
}

void CudaBackend::do_layer_norm_forward(ConstFloatArg x, ConstFloatArg weight, ConstFloatArg bias,
                                        int64_t rows, int64_t hidden, float eps, FloatArg y,
                                        FloatArg mean, FloatArg rstd) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::layer_norm_forward);
  cuda::layer_norm_forward(x, weight, bias, rows, hidden, eps, y, mean, rstd, stream_);
}

void CudaBackend::do_layer_norm_backward(ConstFloatArg dy, ConstFloatArg x, ConstFloatArg weight,
                                         ConstFloatArg mean, ConstFloatArg rstd, int64_t rows,
                                         int64_t hidden, FloatArg dx, FloatArg dweight, FloatArg dbias,
                                         bool accumulate_dx, bool accumulate_params) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::layer_norm_backward);
  cuda::layer_norm_backward(dy, x, weight, mean, rstd, rows, hidden, dx, accumulate_dx, dweight, dbias,
                            accumulate_params, stream_);
}

void CudaBackend::do_add_norm_forward(ConstFloatView a, ConstFloatView b, ConstFloatView c, FloatView sum,
                                      ConstFloatView weight, ConstFloatView bias, int64_t rows, int64_t hidden,
                                      float eps, FloatView y, FloatView mean, FloatView rstd) {
  // The statistics are fp32 whatever the activations' type.
  if (mean.is_fp32() && rstd.is_fp32()) {
    const cuda::ScopedOp scope(profiler_.get(), BackendOp::add_norm_forward);
    if (cuda::add_norm_forward(a, b, c.empty() ? cuda::In() : cuda::In(c), weight, bias.empty() ? cuda::In() : cuda::In(bias), rows, hidden, eps, sum, y,
                               mean.empty() ? nullptr : mean.data(), rstd.data(), stream_)) {
      return;
    }
  }
  Backend::do_add_norm_forward(a, b, c, sum, weight, bias, rows, hidden, eps, y, mean, rstd);
}

void CudaBackend::do_rms_norm_forward(ConstFloatArg x, ConstFloatArg weight, int64_t rows,
                                      int64_t hidden, float eps, FloatArg y, FloatArg rstd) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::rms_norm_forward);
  cuda::rms_norm_forward(x, weight, rows, hidden, eps, y, rstd, stream_);
}

void CudaBackend::do_rms_norm_backward(ConstFloatArg dy, ConstFloatArg x, ConstFloatArg weight,
                                       ConstFloatArg rstd, int64_t rows, int64_t hidden, FloatArg dx,
                                       FloatArg dweight, bool accumulate_dx, bool accumulate_params) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::rms_norm_backward);
  cuda::rms_norm_backward(dy, x, weight, rstd, rows, hidden, dx, accumulate_dx, dweight, accumulate_params, stream_);
}

void CudaBackend::do_gelu_forward(ConstFloatArg x, int64_t n, FloatArg y) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::gelu_forward);
  cuda::gelu_forward(x, n, y, stream_);
}
void CudaBackend::do_gelu_backward(ConstFloatArg dy, ConstFloatArg x, int64_t n, FloatArg dx) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::gelu_backward);
  cuda::gelu_backward(dy, x, n, dx, stream_);
}
void CudaBackend::do_squared_relu_forward(ConstFloatArg x, int64_t n, FloatArg y) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::squared_relu_forward);
  cuda::squared_relu_forward(x, n, y, stream_);
}
void CudaBackend::do_squared_relu_backward(ConstFloatArg dy, ConstFloatArg x, int64_t n, FloatArg dx) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::squared_relu_backward);
  cuda::squared_relu_backward(dy, x, n, dx, stream_);
}
void CudaBackend::do_gelu_tanh_forward(ConstFloatArg x, int64_t n, FloatArg y) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::gelu_tanh_forward);
  cuda::gelu_tanh_forward(x, n, y, stream_);
}
void CudaBackend::do_gelu_tanh_backward(ConstFloatArg dy, ConstFloatArg x, int64_t n, FloatArg dx) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::gelu_tanh_backward);
  cuda::gelu_tanh_backward(dy, x, n, dx, stream_);
}
void CudaBackend::do_swiglu_forward(ConstFloatArg x, int64_t rows, int64_t ffn, FloatArg y) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::swiglu_forward);
  cuda::swiglu_forward(x, rows, ffn, y, stream_);
}
void CudaBackend::do_swiglu_backward(ConstFloatArg dy, ConstFloatArg x, int64_t rows, int64_t ffn,
                                     FloatArg dx) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::swiglu_backward);
  cuda::swiglu_backward(dy, x, rows, ffn, dx, stream_);
}

void CudaBackend::do_dropout_forward(ConstFloatArg x, int64_t n, float p, DropoutKey key, FloatArg y) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::dropout_forward);
  cuda::dropout(x, n, p, key, y, stream_);
}

void CudaBackend::do_standard_normal(int64_t n, DropoutKey key, FloatArg y) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::standard_normal);
  cuda::standard_normal(n, key, y, stream_);
}

void CudaBackend::do_uniform_jitter(ConstFloatArg x, int64_t n, float eps, DropoutKey key, FloatArg y) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::uniform_jitter);
  cuda::uniform_jitter(x, n, eps, key, y, stream_);
}
void CudaBackend::do_dropout_backward(ConstFloatArg dy, int64_t n, float p, DropoutKey key,
                                      FloatArg dx) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::dropout_backward);
  cuda::dropout(dy, n, p, key, dx, stream_);
}

void CudaBackend::do_embedding_forward(const int64_t* ids, int64_t n, ConstFloatArg table,
                                       int64_t vocab_start, int64_t local_rows, int64_t hidden,
                                       FloatArg out) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::embedding_forward);
  cuda::embedding_forward(ids, n, table, vocab_start, local_rows, hidden, out, stream_);
}
void CudaBackend::do_embedding_backward(const int64_t* ids, int64_t n, ConstFloatArg dout,
                                        int64_t vocab_start, int64_t local_rows, int64_t hidden,
                                        FloatArg dtable) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::embedding_backward);
  const size_t bytes = cuda::embedding_backward_scratch_bytes(n, local_rows);
  DeviceArray<unsigned char> scratch(*this, static_cast<int64_t>(bytes));
  cuda::embedding_backward(ids, n, dout, vocab_start, local_rows, hidden, dtable, scratch.view().data(), bytes,
                           stream_);
}

void CudaBackend::do_rotary_forward(ConstFloatArg x, const HeadTensor& shape,
                                    const RotaryParams& params, FloatArg y) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::rotary_forward);
  cuda::rotary(x, shape, params, 1.0f, y, stream_);
}
void CudaBackend::do_rotary_backward(ConstFloatArg dy, const HeadTensor& shape,
                                     const RotaryParams& params, FloatArg dx) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::rotary_backward);
  cuda::rotary(dy, shape, params, -1.0f, dx, stream_);
}

void CudaBackend::do_attention_forward(ConstFloatArg q, ConstFloatArg k, ConstFloatArg v,
                                       const AttentionShape& shape, const AttentionParams& params,
                                       FloatArg out, FloatArg lse) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::attention_forward);
  cuda::CudnnAttention* cudnn = cudnn_attention_for(shape, params);
  if (cudnn != nullptr && cudnn->forward(q, k, v, shape, params, out, lse)) return;
  if (!q.is_fp32()) {  // 2-byte storage where cuDNN does not apply: the fp32 kernel on copies
    report_fp32_attention(shape, params);
    DeviceBuffer q32(*this, q.size()), k32(*this, k.size()), v32(*this, v.size());
    DeviceBuffer out32(*this, out.size());
    do_convert(q, q32.view());
    do_convert(k, k32.view());
    do_convert(v, v32.view());
    cuda::attention_forward(q32.view().data(), k32.view().data(), v32.view().data(), shape, params,
                            out32.view().data(), lse, stream_);
    do_convert(out32.view(), out);
    return;
  }
  cuda::attention_forward(q, k, v, shape, params, out, lse, stream_);
}
void CudaBackend::do_attention_backward(ConstFloatArg q, ConstFloatArg k, ConstFloatArg v,
                                        ConstFloatArg out, ConstFloatArg dout, ConstFloatArg lse,
                                        const AttentionShape& shape,
                                        const AttentionParams& params, FloatArg dq, FloatArg dk,
                                        FloatArg dv) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::attention_backward);
  cuda::CudnnAttention* cudnn = cudnn_attention_for(shape, params);
  if (cudnn != nullptr && cudnn->backward(q, k, v, out, dout, lse, shape, params, dq, dk, dv)) {
    return;
  }
  if (!q.is_fp32()) {  // 2-byte storage where cuDNN does not apply: the fp32 kernel on copies
    std::vector<DeviceBuffer> in32;
    for (ConstFloatView t : {ConstFloatView(q), ConstFloatView(k), ConstFloatView(v),
                             ConstFloatView(out), ConstFloatView(dout)}) {
      do_convert(t, in32.emplace_back(*this, t.size()).view());
    }
    DeviceBuffer dq32(*this, dq.size()), dk32(*this, dk.size()), dv32(*this, dv.size());
    cuda::attention_backward(in32[0].view().data(), in32[1].view().data(), in32[2].view().data(),
                             in32[3].view().data(), in32[4].view().data(), lse, shape, params,
                             dq32.view().data(), dk32.view().data(), dv32.view().data(), stream_);
    do_convert(dq32.view(), dq);
    do_convert(dk32.view(), dk);
    do_convert(dv32.view(), dv);
    return;
  }
  cuda::attention_backward(q, k, v, out, dout, lse, shape, params, dq, dk, dv, stream_);
}

void CudaBackend::report_fp32_attention(const AttentionShape& shape, const AttentionParams& params) {
  // Deterministic mode chose the fp32 kernel; elsewhere the user should know where time goes.
  if (deterministic_ || !cuda::CudnnAttention::built()) return;
  const std::string what = "attention of " + std::to_string(shape.seq_q) + " queries and " +
                           std::to_string(shape.seq_kv) + " keys, head size " + std::to_string(shape.head_dim) +
                           (params.causal ? ", causal" : ", unmasked");
  if (!fp32_attention_reported_.insert(what).second) return;
  log::warn(what + ": runs on mgt's fp32 attention kernel (cuDNN's fused attention does not take it), "
            "several times slower");
}

bool CudaBackend::cudnn_attention_applies(const AttentionShape& shape, const AttentionParams& params) const {
  // cuDNN's attention backward is not deterministic (cudnn_attention.hpp): deterministic mode
  // attends with mgt's own kernels.
  return matmul_precision_ != MatmulPrecision::kFp32 && !deterministic_ && cuda::CudnnAttention::built() &&
         cuda::CudnnAttention::handles(shape, params);
}

bool CudaBackend::attends_fused_qkv(const AttentionShape& shape, const AttentionParams& params) const {
  return activation_type() != FloatType::kF32 && cudnn_attention_applies(shape, params) &&
         cuda::CudnnAttention::handles_fused_qkv(shape, params);
}

void CudaBackend::do_attention_forward_fused_qkv(ConstFloatView mixed, const AttentionShape& shape,
                                                 const AttentionParams& params, FloatView out, FloatView lse) {
  if (!mixed.is_fp32()) {
    if (cuda::CudnnAttention* cudnn = cudnn_attention_for(shape, params)) {
      const cuda::ScopedOp scope(profiler_.get(), BackendOp::attention_forward);
      if (cudnn->forward_fused_qkv(mixed, shape, params, out, static_cast<float*>(lse.raw()))) return;
    }
  }
  Backend::do_attention_forward_fused_qkv(mixed, shape, params, out, lse);
}

void CudaBackend::do_attention_backward_fused_qkv(ConstFloatView mixed, ConstFloatView out, ConstFloatView dout,
                                                  ConstFloatView lse, const AttentionShape& shape,
                                                  const AttentionParams& params, FloatView d_mixed) {
  if (!mixed.is_fp32()) {
    if (cuda::CudnnAttention* cudnn = cudnn_attention_for(shape, params)) {
      const cuda::ScopedOp scope(profiler_.get(), BackendOp::attention_backward);
      if (cudnn->backward_fused_qkv(mixed, out, dout, static_cast<const float*>(lse.raw()), shape, params,
                                    d_mixed))
        return;
    }
  }
  Backend::do_attention_backward_fused_qkv(mixed, out, dout, lse, shape, params, d_mixed);
}

cuda::CudnnAttention* CudaBackend::cudnn_attention_for(const AttentionShape& shape,
                                                       const AttentionParams& params) {
  if (!cudnn_attention_applies(shape, params)) return nullptr;
  if (cudnn_attention_ == nullptr)
    cudnn_attention_ = std::make_unique<cuda::CudnnAttention>(stream_);
  return cudnn_attention_.get();
}

void CudaBackend::do_cached_attention(FloatView q, FloatView k, ConstFloatView v, FloatView key_cache,
                                      FloatView value_cache, ConstIndexView length, const AttentionShape& shape,
                                      const RotaryParams* rotary, float softmax_scale, FloatView out) {
  if (shape.head_dim > cuda::kCachedAttentionMaxHeadDim) {
    Backend::do_cached_attention(q, k, v, key_cache, value_cache, length, shape, rotary, softmax_scale, out);
    return;
  }
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::cached_attention);
  if (rotary != nullptr) {
    cuda::rotary(q, shape.query(), *rotary, 1.0f, q, stream_, length.data());
    const HeadTensor keys{shape.seq_q, shape.batch, shape.groups, shape.head_dim, SeqLayout::kSeqMajor};
    cuda::rotary(k, keys, *rotary, 1.0f, k, stream_, length.data());
  }
  cuda::cached_attention(q, k, v, key_cache, value_cache, length.data(), shape, softmax_scale, out, stream_);
}

void CudaBackend::do_qkv_split(ConstFloatArg mixed, int64_t tokens, int64_t heads, int64_t groups,
                               int64_t unit, FloatArg q, FloatArg k, FloatArg v) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::qkv_split);
  cuda::qkv_split(mixed, tokens, heads, groups, unit, q, k, v, stream_);
}
void CudaBackend::do_qkv_merge(ConstFloatArg q, ConstFloatArg k, ConstFloatArg v, int64_t tokens,
                               int64_t heads, int64_t groups, int64_t unit, FloatArg mixed) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::qkv_merge);
  cuda::qkv_merge(q, k, v, tokens, heads, groups, unit, mixed, stream_);
}

void CudaBackend::do_cross_entropy_shard_statistics(ConstFloatArg logits, const int64_t* targets,
                                                    int64_t rows, int64_t vocab, int64_t vocab_start,
                                                    FloatArg statistics) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::cross_entropy_shard_statistics);
  cuda::cross_entropy_shard_statistics(logits, targets, rows, vocab, vocab_start, statistics, stream_);
}
void CudaBackend::do_cross_entropy_combine(ConstFloatArg statistics, int64_t ranks, int64_t rows,
                                           FloatArg loss, FloatArg row_max, FloatArg sum_exp) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::cross_entropy_combine);
  cuda::cross_entropy_combine(statistics, ranks, rows, loss, row_max, sum_exp, stream_);
}
void CudaBackend::do_cross_entropy_forward(ConstFloatArg logits, const int64_t* targets,
                                           int64_t rows, int64_t vocab, FloatArg loss,
                                           FloatArg row_max, FloatArg sum_exp) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::cross_entropy_forward);
  cuda::cross_entropy_forward(logits, targets, rows, vocab, loss, row_max, sum_exp, stream_);
}
void CudaBackend::do_cross_entropy_backward(ConstFloatArg logits, const int64_t* targets,
                                            ConstFloatArg row_max, ConstFloatArg sum_exp,
                                            ConstFloatArg dloss, int64_t rows, int64_t vocab,
                                            int64_t vocab_start, FloatArg dlogits) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::cross_entropy_backward);
  cuda::cross_entropy_backward(logits, targets, row_max, sum_exp, dloss, rows, vocab, vocab_start,
                               dlogits, stream_);
}

MaskedLossSum CudaBackend::do_masked_loss_sum(ConstFloatArg loss, ConstFloatArg loss_mask,
                                              int64_t rows) {
  do_masked_loss_sum_on_device(loss, loss_mask, rows, reduction_, false);
  double sums[2] = {0.0, 0.0};
  do_copy_to_host(reduction_, sums, sizeof sums);
  MaskedLossSum total;
  total.loss_sum = sums[0];
  total.tokens = sums[1];
  return total;
}

void CudaBackend::do_masked_loss_sum_on_device(ConstFloatArg loss, ConstFloatArg loss_mask, int64_t rows,
                                               double* sums, bool accumulate) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::masked_loss_sum);
  cuda::masked_loss_sum(loss, loss_mask, rows, sums, accumulate, stream_);
}

void CudaBackend::do_row_argmax(ConstFloatArg x, int64_t rows, int64_t cols, int64_t row_stride,
                                int64_t* out) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::row_argmax);
  cuda::row_argmax(x, rows, cols, row_stride, out, stream_);
}

void CudaBackend::do_masked_loss_grad(ConstFloatArg loss_mask, int64_t rows, float scale,
                                      FloatArg dloss) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::masked_loss_grad);
  cuda::masked_loss_grad(loss_mask, rows, scale, dloss, stream_);
}

void CudaBackend::do_add_bias(FloatArg y, ConstFloatArg bias, int64_t rows, int64_t cols) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::add_bias);
  cuda::add_bias(y, bias, rows, cols, stream_);
}
void CudaBackend::do_add(ConstFloatArg a, ConstFloatArg b, ConstFloatArg c, int64_t n, FloatArg out) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::add);
  cuda::add(a, b, c, n, out, stream_);
}
void CudaBackend::do_attention_merge(ConstFloatArg part_out, ConstFloatArg part_lse, const HeadTensor& whole,
                                     int64_t first_row, int64_t part_rows, FloatArg out, FloatArg lse) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::attention_merge);
  cuda::attention_merge(part_out, part_lse, whole, first_row, part_rows, out, lse, stream_);
}

void CudaBackend::do_accumulate(FloatArg y, ConstFloatArg x, int64_t n) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::accumulate);
  cuda::accumulate(y, x, n, stream_);
}
void CudaBackend::do_moe_route(ConstFloatArg logits, const MoeRoutingParams& p, FloatArg gates, FloatArg probs,
                               FloatArg routing_map, FloatArg aux_counts, double* statistics, bool accumulate) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::moe_route);
  DeviceArray<float> chosen(*this, p.tokens * p.experts);
  DeviceArray<double> score_sums(*this, cuda::moe_route_score_doubles(p));
  cuda::moe_route(logits, p, gates, probs, routing_map, aux_counts, statistics, accumulate, chosen.view().data(),
                  score_sums.view().data(), stream_);
}
void CudaBackend::do_moe_route_backward(ConstFloatArg logits, const MoeRoutingParams& p, ConstFloatArg d_probs,
                                        ConstFloatArg routing_map, ConstFloatArg aux_counts, float aux_grad,
                                        float z_grad, FloatArg d_logits) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::moe_route_backward);
  DeviceArray<float> scratch(*this, 3 * p.tokens * p.experts);
  cuda::moe_route_backward(logits, p, d_probs, routing_map, aux_counts, aux_grad, z_grad, d_logits,
                           scratch.view().data(), stream_);
}
void CudaBackend::do_moe_sinkhorn(ConstFloatArg logits, int64_t tokens, int64_t experts, FloatArg out) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::moe_sinkhorn);
  DeviceArray<float> token_factors(*this, tokens);
  cuda::moe_sinkhorn(logits, tokens, experts, out, token_factors.view().data(), stream_);
}
void CudaBackend::do_moe_permutation(ConstFloatView routing_map, const MoePermutation& p, IndexView row_token,
                                     IndexView row_slot, IndexView token_rows, IndexView slot_row,
                                     IndexView expert_rows) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::moe_permutation);
  cuda::moe_permutation(routing_map.data(), p, row_token.size(), row_token.data(), row_slot.data(), token_rows.data(),
                        slot_row.data(), expert_rows.data(), stream_);
}

void CudaBackend::do_gather_rows(ConstFloatArg in, int64_t /*in_rows*/, int64_t cols, const int64_t* index,
                                 int64_t out_rows, ConstFloatArg weights, FloatArg out) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::gather_rows);
  cuda::gather_rows(in, cols, index, out_rows, weights, out, stream_);
}
void CudaBackend::do_gather_sum_rows(ConstFloatArg in, int64_t /*in_rows*/, int64_t cols, const int64_t* index,
                                     int64_t out_rows, int64_t k, ConstFloatArg weights, FloatArg out) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::gather_sum_rows);
  cuda::gather_sum_rows(in, cols, index, out_rows, k, weights, out, stream_);
}
void CudaBackend::do_scale_rows(ConstFloatArg x, ConstFloatArg factors, int64_t rows, int64_t cols, FloatArg out) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::scale_rows);
  cuda::scale_rows(x, factors, rows, cols, out, stream_);
}
void CudaBackend::do_row_dot(ConstFloatArg a, ConstFloatArg b, int64_t rows, int64_t cols, FloatArg out) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::row_dot);
  cuda::row_dot(a, b, rows, cols, out, stream_);
}
void CudaBackend::do_scale(FloatArg x, int64_t n, float factor) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::scale); cuda::scale(x, n, factor, stream_); }

void CudaBackend::do_cross_entropy_forward_backward(FloatView logits, ConstIndexView targets,
                                                    ConstFloatView dloss, int64_t rows,
                                                    int64_t vocab, FloatView loss) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::cross_entropy_forward_backward);
  cuda::cross_entropy_forward_backward(logits, targets.data(), dloss.data(), rows, vocab,
                                       loss.data(), logits, stream_);
}

void CudaBackend::do_adamw_update(FloatView param, ConstFloatView grad, FloatView exp_avg,
                                  FloatView exp_avg_sq, std::span<const int64_t> segment_ends,
                                  std::span<const int64_t> segment_flags, const AdamWParams& params,
                                  float decoupled_lr, float grad_scale, int64_t step,
                                  FloatView compute) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::adamw_update);
  const auto segments = static_cast<int64_t>(segment_ends.size());
  if (static_cast<int64_t>(segments_host_.size()) != 2 * segments ||
      !std::equal(segment_ends.begin(), segment_ends.end(), segments_host_.begin()) ||
      !std::equal(segment_flags.begin(), segment_flags.end(), segments_host_.begin() + segments)) {
    segments_host_.assign(segment_ends.begin(), segment_ends.end());
    segments_host_.insert(segments_host_.end(), segment_flags.begin(), segment_flags.end());
    segments_device_ = DeviceIndexBuffer(*this, 2 * segments);
    copy_from_host<int64_t>(segments_host_, segments_device_.view());
  }
  const int64_t* ends = segments_device_.view().data();
  // bf16 moments (the precision-aware optimizer) are read and written by the kernel itself.
  cuda::adamw_update(param.data(), grad.data(), cuda::Out(exp_avg), cuda::Out(exp_avg_sq), param.size(),
                     ends, ends + segments, segments, params, decoupled_lr, grad_scale, step,
                     compute.empty() ? cuda::Out() : cuda::Out(compute), stream_);
}

void CudaBackend::do_adamw_step(FloatArg param, ConstFloatArg grad, FloatArg exp_avg, FloatArg exp_avg_sq,
                                int64_t n, const AdamWParams& params, int64_t step) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::adamw_step);
  cuda::adamw_step(param, grad, exp_avg, exp_avg_sq, n, params, step, stream_);
}

double CudaBackend::do_sum_of_squares(ConstFloatArg x, int64_t n) {
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::sum_of_squares);
  cuda::sum_of_squares(x, n, reduction_, stream_);
  double result = 0.0;
  do_copy_to_host(reduction_, &result, sizeof result);
  return result;
}

double CudaBackend::do_sum_of_squares_ranges(ConstFloatView x, std::span<const ElementRange> ranges) {
  if (!x.is_fp32()) return Backend::do_sum_of_squares_ranges(x, ranges);  // staged to fp32 range by range
  const cuda::ScopedOp scope(profiler_.get(), BackendOp::sum_of_squares);
  cuda::sum_of_squares(x.data(), ranges.data(), ranges.size(), reduction_, stream_);
  double result = 0.0;
  do_copy_to_host(reduction_, &result, sizeof result);
  return result;
}

}  // namespace mgt
