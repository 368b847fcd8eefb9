#include "kernels/backend.hpp"

#include <chrono>
#include <initializer_list>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace mgt {
namespace {

[[noreturn]] void fail(const char* op, const std::string& what) {
  throw Error(std::string("Backend::") + op + ": " + what);
}

[[noreturn]] void fail(BackendOp op, const std::string& what) { fail(backend_op_name(op), what); }

void dims(BackendOp op, std::initializer_list<int64_t> values) {
  for (const int64_t v : values) {
    if (v < 0) fail(op, "sizes must be >= 0");
  }
}

// Every view must hold exactly the elements the operation will touch: a larger view usually
// means the caller passed the wrong buffer.
template <typename T>
void expect(DeviceSpan<T> view, int64_t want, BackendOp op, const char* name) {
  if (view.size() != want) {
    fail(op, std::string(name) + " has " + std::to_string(view.size()) + " elements, expected " +
                 std::to_string(want));
  }
  if (want > 0 && view.data() == nullptr) fail(op, std::string(name) + " is null");
}

void expect(ConstFloatView view, int64_t want, BackendOp op, const char* name) {
  if (view.size() != want) {
    fail(op, std::string(name) + " has " + std::to_string(view.size()) + " elements, expected " +
                 std::to_string(want));
  }
  if (want > 0 && view.raw() == nullptr) fail(op, std::string(name) + " is null");
}

void expect_optional(ConstFloatView view, int64_t want, BackendOp op, const char* name) {
  if (!view.empty()) expect(view, want, op, name);
}

// Optional operands (biases) are either empty or exactly sized.
template <typename T>
void expect_optional(DeviceSpan<T> view, int64_t want, BackendOp op, const char* name) {
  if (!view.empty()) expect(view, want, op, name);
}

}  // namespace

// The operands of one operation as its hook receives them: each view as it is where it is fp32 or
// the backend takes other types for this operation, else an fp32 copy (inputs and accumulated
// outputs converted in; outputs converted back by finish()). A hook that throws leaves the
// outputs unwritten, as the fp32 path would leave them partly written.
class Fp32Staging {
public:
  Fp32Staging(Backend& backend, BackendOp op)
      : backend_(backend),
        native_bf16_(backend.takes_natively(op, FloatType::kBf16)),
        native_f16_(backend.takes_natively(op, FloatType::kF16)) {}
  Fp32Staging(const Fp32Staging&) = delete;
  Fp32Staging& operator=(const Fp32Staging&) = delete;

  ConstFloatArg in(ConstFloatView view) {
    if (!staged(view)) return view;
    FloatView copy = temporary(view.size());
    backend_.do_convert(view, copy);
    return ConstFloatView(copy);
  }
  FloatArg out(FloatView view) {
    if (!staged(view)) return view;
    FloatView copy = temporary(view.size());
    results_.push_back({copy, view});
    return copy;
  }
  FloatArg inout(FloatView view) {
    if (!staged(view)) return view;
    FloatView copy = temporary(view.size());
    backend_.do_convert(view, copy);
    results_.push_back({copy, view});
    return copy;
  }
  void finish() {
    for (const auto& [copy, view] : results_) backend_.do_convert(copy, view);
    results_.clear();
  }

private:
  bool staged(ConstFloatView view) const {
    if (view.empty()) return false;
    switch (view.type()) {
      case FloatType::kF32: return false;
      case FloatType::kBf16: return !native_bf16_;
      case FloatType::kF16: return !native_f16_;
    }
    return true;
  }
  FloatView temporary(int64_t n) { return copies_.emplace_back(backend_, n).view(); }

  Backend& backend_;
  bool native_bf16_;
  bool native_f16_;
  std::vector<DeviceBuffer> copies_;
  std::vector<std::pair<FloatView, FloatView>> results_;
};

const char* float_type_name(FloatType type) {
  switch (type) {
    case FloatType::kF32: return "fp32";
    case FloatType::kBf16: return "bf16";
    case FloatType::kF16: return "fp16";
  }
  return "?";
}

void throw_not_fp32(FloatType type) {
  throw Error(std::string("a ") + float_type_name(type) +
              " view reached code that reads fp32 only (an operation missing its conversion)");
}

void throw_device_span_range(int64_t offset, int64_t count, int64_t size) {
  throw Error("device view: elements [" + std::to_string(offset) + ", " +
              std::to_string(offset + count) + ") are outside a view of " + std::to_string(size) +
              " elements");
}

namespace {

// The CPU's operations complete before they return: there is nothing to wait for, and an event
// is the moment it was recorded.
class CompletedEvent final : public QueueEvent {
public:
  void wait() override {}
  double seconds_since(QueueEvent& earlier) override {
    const auto* e = dynamic_cast<const CompletedEvent*>(&earlier);
    if (e == nullptr) throw Error("QueueEvent::seconds_since: an event of another backend");
    return std::chrono::duration<double>(at_ - e->at_).count();
  }

private:
  std::chrono::steady_clock::time_point at_ = std::chrono::steady_clock::now();
};

}  // namespace

std::unique_ptr<QueueEvent> Backend::record_event() { return std::make_unique<CompletedEvent>(); }

std::unique_ptr<QueueEvent> Backend::record_timed_event() { return std::make_unique<CompletedEvent>(); }

void* Backend::do_allocate_pinned(size_t bytes) { return ::operator new(bytes); }

void Backend::do_free_pinned(void* data, size_t /*bytes*/) noexcept { ::operator delete(data); }

void Backend::check_transfer(int64_t from, int64_t to, const char* op) {
  if (from != to) {
    fail(op, "source has " + std::to_string(from) + " elements, destination " + std::to_string(to));
  }
}

void Backend::copy_from_host(std::span<const float> host, FloatView device) {
  check_transfer(static_cast<int64_t>(host.size()), device.size(), "copy_from_host");
  if (device.is_fp32()) return do_copy_from_host(host.data(), device.raw(), host.size_bytes());
  DeviceBuffer staged(*this, device.size());
  do_copy_from_host(host.data(), staged.view().raw(), host.size_bytes());
  do_convert(staged.view(), device);
}

void Backend::copy_to_host(ConstFloatView device, std::span<float> host) {
  check_transfer(device.size(), static_cast<int64_t>(host.size()), "copy_to_host");
  if (device.is_fp32()) return do_copy_to_host(device.raw(), host.data(), host.size_bytes());
  DeviceBuffer staged(*this, device.size());
  do_convert(device, staged.view());
  do_copy_to_host(staged.view().raw(), host.data(), host.size_bytes());
}

void Backend::copy(ConstFloatView src, FloatView dst) {
  constexpr BackendOp op = BackendOp::copy;
  expect(dst, src.size(), op, "dst");
  if (src.type() != dst.type()) fail(op, "source and destination types differ (use convert)");
  if (src.empty()) return;
  Fp32Staging st(*this, op);
  do_copy(st.in(src), st.out(dst), src.size());
  st.finish();
}

void Backend::copy_ranges(ConstFloatView src, FloatView dst, std::span<const CopyRange> ranges) {
  constexpr BackendOp op = BackendOp::copy_ranges;
  if (src.type() != dst.type()) fail(op, "source and destination types differ");
  for (const CopyRange& r : ranges) {
    if (r.count < 0 || r.src < 0 || r.dst < 0 || r.src + r.count > src.size() || r.dst + r.count > dst.size())
      fail(op, "range [" + std::to_string(r.src) + ", +" + std::to_string(r.count) + ") -> [" +
                              std::to_string(r.dst) + ", +" + std::to_string(r.count) + ") lies outside views of " +
                              std::to_string(src.size()) + " and " + std::to_string(dst.size()) + " elements");
  }
  if (!ranges.empty()) do_copy_ranges(src, dst, ranges);
}

void Backend::do_copy_ranges(ConstFloatView src, FloatView dst, std::span<const CopyRange> ranges) {
  for (const CopyRange& r : ranges) {
    if (r.count > 0) copy(src.subspan(r.src, r.count), dst.subspan(r.dst, r.count));
  }
}

void Backend::convert(ConstFloatView src, FloatView dst) {
  expect(dst, src.size(), BackendOp::convert, "dst");
  if (src.size() > 0) do_convert(src, dst);
}

void Backend::fill(FloatView x, float value) {
  if (x.empty()) return;
  Fp32Staging st(*this, BackendOp::fill);
  do_fill(st.out(x), x.size(), value);
  st.finish();
}

void Backend::linear_forward(ConstFloatView x, ConstFloatView w, ConstFloatView bias, int64_t rows,
                             int64_t in, int64_t out, FloatView y) {
  constexpr BackendOp op = BackendOp::linear_forward;
  dims(op, {rows, in, out});
  expect(x, rows * in, op, "x");
  expect(w, out * in, op, "w");
  expect_optional(bias, out, op, "bias");
  expect(y, rows * out, op, "y");
  Fp32Staging st(*this, op);
  do_linear_forward(st.in(x), st.in(w), st.in(bias), rows, in, out, st.out(y));
  st.finish();
}

void Backend::linear_backward_input(ConstFloatView dy, ConstFloatView w, int64_t rows, int64_t in,
                                    int64_t out, FloatView dx) {
  constexpr BackendOp op = BackendOp::linear_backward_input;
  dims(op, {rows, in, out});
  expect(dy, rows * out, op, "dy");
  expect(w, out * in, op, "w");
  expect(dx, rows * in, op, "dx");
  Fp32Staging st(*this, op);
  do_linear_backward_input(st.in(dy), st.in(w), rows, in, out, st.out(dx));
  st.finish();
}

void Backend::linear_backward_weight(ConstFloatView dy, ConstFloatView x, int64_t rows, int64_t in,
                                     int64_t out, FloatView dw, bool accumulate) {
  constexpr BackendOp op = BackendOp::linear_backward_weight;
  dims(op, {rows, in, out});
  expect(dy, rows * out, op, "dy");
  expect(x, rows * in, op, "x");
  expect(dw, out * in, op, "dw");
  if (rows == 0) {
    if (!accumulate) fill(dw, 0.0f);
    return;
  }
  Fp32Staging st(*this, op);
  do_linear_backward_weight(st.in(dy), st.in(x), rows, in, out, accumulate ? st.inout(dw) : st.out(dw), accumulate);
  st.finish();
}

void Backend::linear_forward_fp64(ConstFloatView x, ConstFloatView w, int64_t rows, int64_t in, int64_t out,
                                  FloatView y) {
  constexpr BackendOp op = BackendOp::linear_forward_fp64;
  dims(op, {rows, in, out});
  expect(x, rows * in, op, "x");
  expect(w, out * in, op, "w");
  expect(y, rows * out, op, "y");
  if (rows == 0 || out == 0) return;
  Fp32Staging st(*this, op);
  do_linear_forward_fp64(st.in(x), st.in(w), rows, in, out, st.out(y));
  st.finish();
}

void Backend::linear_backward_fp64(ConstFloatView dy, ConstFloatView x, ConstFloatView w, int64_t rows, int64_t in,
                                   int64_t out, FloatView dx, FloatView dw, bool accumulate) {
  constexpr BackendOp op = BackendOp::linear_backward_fp64;
  dims(op, {rows, in, out});
  expect(dy, rows * out, op, "dy");
  expect(x, rows * in, op, "x");
  expect(w, out * in, op, "w");
  expect_optional(dx, rows * in, op, "dx");
  expect(dw, out * in, op, "dw");
  if (rows == 0) {
    if (!accumulate) fill(dw, 0.0f);
    return;
  }
  Fp32Staging st(*this, op);
  do_linear_backward_fp64(st.in(dy), st.in(x), st.in(w), rows, in, out, st.out(dx),
                          accumulate ? st.inout(dw) : st.out(dw), accumulate);
  st.finish();
}

void Backend::bias_backward(ConstFloatView dy, int64_t rows, int64_t cols, FloatView dbias, bool accumulate) {
  constexpr BackendOp op = BackendOp::bias_backward;
  dims(op, {rows, cols});
  expect(dy, rows * cols, op, "dy");
  expect(dbias, cols, op, "dbias");
  if (rows == 0) {
    if (!accumulate) fill(dbias, 0.0f);
    return;
  }
  Fp32Staging st(*this, op);
  do_bias_backward(st.in(dy), rows, cols, accumulate ? st.inout(dbias) : st.out(dbias), accumulate);
  st.finish();
}

namespace {

void expect_fp32(ConstFloatView view, int64_t want, BackendOp op, const char* name) {
  expect(view, want, op, name);
  if (!view.is_fp32()) fail(op, std::string(name) + " must be fp32, not " + float_type_name(view.type()));
}

void expect_fp8(ConstFp8View view, int64_t want, BackendOp op, const char* name) {
  expect(view.codes, want, op, name);
  expect_fp32(view.scale_inv, 1, op, (std::string(name) + "'s scale_inv").c_str());
}

// A cast of `elements` values with `scaling` into rowwise and/or transposed codes.
void expect_cast(BackendOp op, int64_t elements, const Fp8Scaling& scaling, ConstFp8View rowwise,
                 ConstFp8View transposed) {
  expect_fp32(scaling.scale, 1, op, "scale");
  if (scaling.current || !scaling.amax.empty()) expect_fp32(scaling.amax, 1, op, "amax");
  if (!rowwise.empty()) expect_fp8(rowwise, elements, op, "rowwise");
  if (!transposed.empty()) expect_fp8(transposed, elements, op, "transposed");
}

}  // namespace

void Backend::fp8_quantize(ConstFloatView x, int64_t rows, int64_t cols, const Fp8Scaling& scaling,
                           Fp8View rowwise, Fp8View transposed) {
  constexpr BackendOp op = BackendOp::fp8_quantize;
  dims(op, {rows, cols});
  expect(x, rows * cols, op, "x");
  expect_cast(op, rows * cols, scaling, rowwise, transposed);
  Fp32Staging st(*this, op);
  do_fp8_quantize(st.in(x), rows, cols, scaling, rowwise, transposed);
}

void Backend::fp8_quantize_gradient(ConstFloatView dy, ConstFloatView pre, int64_t rows, int64_t cols,
                                    const Fp8Scaling& scaling, Fp8View rowwise, Fp8View transposed, FloatView dbias,
                                    FloatView dpre, bool accumulate_dbias) {
  constexpr BackendOp op = BackendOp::fp8_quantize_gradient;
  dims(op, {rows, cols});
  expect(dy, rows * cols, op, "dy");
  expect_optional(pre, rows * cols, op, "pre");
  if (!dpre.empty()) {
    if (pre.empty()) fail(op, "dpre is written only with pre");
    expect(dpre, rows * cols, op, "dpre");
    if (dpre.type() != dy.type()) fail(op, "dpre must have dy's type");
  }
  if (!dbias.empty()) expect(dbias, cols, op, "dbias");
  // No rows: the cast still records its amax and scale_inv as any cast does; a bias gradient
  // written over is zero.
  if (rows == 0 && !dbias.empty() && !accumulate_dbias) {
    fill(dbias, 0.0f);
    accumulate_dbias = true;
  }
  do_fp8_quantize_gradient(dy, pre, rows, cols, scaling, rowwise, transposed, dbias, dpre, accumulate_dbias);
}

void Backend::do_fp8_quantize_gradient(ConstFloatView dy, ConstFloatView pre, int64_t rows, int64_t cols,
                                       const Fp8Scaling& scaling, Fp8View rowwise, Fp8View transposed,
                                       FloatView dbias, FloatView dpre, bool accumulate_dbias) {
  ConstFloatView g = dy;
  DeviceBuffer through_gelu;
  if (!pre.empty()) {
    if (dpre.empty()) {
      through_gelu = DeviceBuffer(*this, rows * cols, dy.type());
      dpre = through_gelu.view();
    }
    gelu_tanh_backward(dy, pre, dpre);
    g = dpre;
  }
  fp8_quantize(g, rows, cols, scaling, rowwise, transposed);
  if (!dbias.empty()) bias_backward(g, rows, cols, dbias, accumulate_dbias);
}

void Backend::fp8_quantize_gelu_tanh(ConstFloatView pre, int64_t rows, int64_t cols, const Fp8Scaling& scaling,
                                     Fp8View rowwise, Fp8View transposed) {
  constexpr BackendOp op = BackendOp::fp8_quantize_gelu_tanh;
  dims(op, {rows, cols});
  expect(pre, rows * cols, op, "pre");
  expect_cast(op, rows * cols, scaling, rowwise, transposed);
  do_fp8_quantize_gelu_tanh(pre, rows, cols, scaling, rowwise, transposed);
}

void Backend::do_fp8_quantize_gelu_tanh(ConstFloatView pre, int64_t rows, int64_t cols, const Fp8Scaling& scaling,
                                        Fp8View rowwise, Fp8View transposed) {
  DeviceBuffer y(*this, rows * cols, pre.type());
  gelu_tanh_forward(pre, y.view());
  fp8_quantize(y.view(), rows, cols, scaling, rowwise, transposed);
}

void Backend::fp8_transpose(Fp8View x, int64_t rows, int64_t cols, ConstFloatView scale, Fp8View transposed) {
  constexpr BackendOp op = BackendOp::fp8_transpose;
  dims(op, {rows, cols});
  expect_fp8(x, rows * cols, op, "x");
  expect_fp8(transposed, rows * cols, op, "transposed");
  expect_fp32(scale, 1, op, "scale");
  do_fp8_transpose(x, rows, cols, scale, transposed);
}

void Backend::do_fp8_transpose(Fp8View x, int64_t rows, int64_t cols, ConstFloatView scale, Fp8View transposed) {
  std::vector<uint8_t> codes(static_cast<size_t>(rows * cols)), columns(codes.size());
  copy_to_host<uint8_t>(x.codes, codes);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      columns[static_cast<size_t>(c * rows + r)] = codes[static_cast<size_t>(r * cols + c)];
  copy_from_host<uint8_t>(columns, transposed.codes);
  float s = 0.0f;
  copy_to_host(scale, std::span<float>(&s, 1));
  const float inverse = 1.0f / s;
  copy_from_host(std::span<const float>(&inverse, 1), x.scale_inv);
  copy_from_host(std::span<const float>(&inverse, 1), transposed.scale_inv);
}

void Backend::fp8_norm_forward(ConstFloatView x, ConstFloatView b, FloatView sum, ConstFloatView weight,
                               ConstFloatView bias, int64_t rows, int64_t hidden, float eps, const Fp8Scaling& scaling,
                               Fp8View rowwise, FloatView mean, FloatView rstd, ConstFloatView c) {
  constexpr BackendOp op = BackendOp::fp8_norm_forward;
  dims(op, {rows, hidden});
  expect(x, rows * hidden, op, "x");
  if (b.empty()) {
    if (!sum.empty() || !c.empty()) fail(op, "sum and c go only with b (the residual add)");
  } else {
    expect(b, rows * hidden, op, "b");
    expect_optional(c, rows * hidden, op, "c");
    expect(sum, rows * hidden, op, "sum");
  }
  expect(weight, hidden, op, "weight");
  expect_optional(bias, hidden, op, "bias");
  expect_optional(mean, rows, op, "mean");
  expect(rstd, rows, op, "rstd");
  if (mean.empty() && !bias.empty()) fail(op, "RMSNorm (no mean) takes no bias");
  if (rowwise.empty()) fail(op, "rowwise is required");
  expect_cast(op, rows * hidden, scaling, rowwise, {});
  do_fp8_norm_forward(x, b, c, sum, weight, bias, rows, hidden, eps, scaling, rowwise, mean, rstd);
}

void Backend::do_fp8_norm_forward(ConstFloatView x, ConstFloatView b, ConstFloatView c, FloatView sum,
                                  ConstFloatView weight, ConstFloatView bias, int64_t rows, int64_t hidden, float eps,
                                  const Fp8Scaling& scaling, Fp8View rowwise, FloatView mean, FloatView rstd) {
  DeviceBuffer y(*this, rows * hidden, b.empty() ? x.type() : sum.type());
  if (!b.empty()) {
    add_norm_forward(x, b, sum, weight, bias, rows, hidden, eps, y.view(), mean, rstd, c);
  } else if (mean.empty()) {
    rms_norm_forward(x, weight, rows, hidden, eps, y.view(), rstd);
  } else {
    layer_norm_forward(x, weight, bias, rows, hidden, eps, y.view(), mean, rstd);
  }
  fp8_quantize(y.view(), rows, hidden, scaling, rowwise, {});
}

void Backend::fp8_linear(ConstFp8View x, ConstFp8View w, ConstFloatView bias, int64_t rows, int64_t in,
                         int64_t out, FloatView y, bool accumulate, Fp8GemmRole role) {
  constexpr BackendOp op = BackendOp::fp8_linear;
  dims(op, {rows, in, out});
  expect_fp8(x, rows * in, op, "x");
  expect_fp8(w, out * in, op, "w");
  expect_optional(bias, out, op, "bias");
  expect(y, rows * out, op, "y");
  if (in == 0 && bias.empty()) {  // a weight gradient over no rows
    if (!accumulate) fill(y, 0.0f);
    return;
  }
  Fp32Staging st(*this, op);
  do_fp8_linear(x, w, st.in(bias), rows, in, out, accumulate ? st.inout(y) : st.out(y), accumulate, role);
  st.finish();
}

void Backend::fp8_linear_gelu_tanh_forward(ConstFp8View x, ConstFp8View w, ConstFloatView bias, int64_t rows,
                                           int64_t in, int64_t out, FloatView pre, FloatView y) {
  constexpr BackendOp op = BackendOp::fp8_linear_gelu_tanh_forward;
  dims(op, {rows, in, out});
  expect_fp8(x, rows * in, op, "x");
  expect_fp8(w, out * in, op, "w");
  expect_optional(bias, out, op, "bias");
  expect(pre, rows * out, op, "pre");
  expect(y, rows * out, op, "y");
  do_fp8_linear_gelu_tanh_forward(x, w, bias, rows, in, out, pre, y);
}

void Backend::do_fp8_linear_gelu_tanh_forward(ConstFp8View x, ConstFp8View w, ConstFloatView bias, int64_t rows,
                                              int64_t in, int64_t out, FloatView pre, FloatView y) {
  fp8_linear(x, w, bias, rows, in, out, pre, false, Fp8GemmRole::kForward);
  gelu_tanh_forward(pre, y);
}

void Backend::fp8_scaling_update(FloatView history, FloatView scale, int64_t tensors, int64_t history_len,
                                 Fp8AmaxAlgo algo, float scaled_max) {
  constexpr BackendOp op = BackendOp::fp8_scaling_update;
  dims(op, {tensors, history_len});
  if (history_len < 1) fail(op, "history_len must be >= 1");
  expect_fp32(history, tensors * history_len, op, "history");
  expect_fp32(scale, tensors, op, "scale");
  if (tensors == 0) return;
  do_fp8_scaling_update(history, scale, tensors, history_len, algo, scaled_max);
}

void Backend::linear_gelu_tanh_forward(ConstFloatView x, ConstFloatView w, ConstFloatView bias,
                                       int64_t rows, int64_t in, int64_t out, FloatView pre,
                                       FloatView y) {
  constexpr BackendOp op = BackendOp::linear_gelu_tanh_forward;
  dims(op, {rows, in, out});
  expect(x, rows * in, op, "x");
  expect(w, out * in, op, "w");
  expect_optional(bias, out, op, "bias");
  expect(pre, rows * out, op, "pre");
  expect(y, rows * out, op, "y");
  do_linear_gelu_tanh_forward(x, w, bias, rows, in, out, pre, y);
}

void Backend::do_linear_gelu_tanh_forward(ConstFloatView x, ConstFloatView w, ConstFloatView bias,
                                          int64_t rows, int64_t in, int64_t out, FloatView pre,
                                          FloatView y) {
  linear_forward(x, w, bias, rows, in, out, pre);
  gelu_tanh_forward(pre, y);
}

void Backend::linear_backward_input_gelu_tanh(ConstFloatView dy, ConstFloatView w, ConstFloatView pre,
                                              int64_t rows, int64_t in, int64_t out, FloatView dpre) {
  constexpr BackendOp op = BackendOp::linear_backward_input_gelu_tanh;
  dims(op, {rows, in, out});
  expect(dy, rows * out, op, "dy");
  expect(w, out * in, op, "w");
  expect(pre, rows * in, op, "pre");
  expect(dpre, rows * in, op, "dpre");
  do_linear_backward_input_gelu_tanh(dy, w, pre, rows, in, out, dpre);
}

void Backend::do_linear_backward_input_gelu_tanh(ConstFloatView dy, ConstFloatView w,
                                                 ConstFloatView pre, int64_t rows, int64_t in,
                                                 int64_t out, FloatView dpre) {
  linear_backward_input(dy, w, rows, in, out, dpre);
  gelu_tanh_backward(dpre, pre, dpre);
}

namespace {

// The groups' rows, each >= 0, and their sum; `views` views per group (a weight or gradient each).
int64_t grouped_rows(BackendOp op, std::span<const int64_t> group_rows, size_t views, const char* name) {
  if (views != group_rows.size())
    fail(op, std::string(name) + " has " + std::to_string(views) + " views for " +
                 std::to_string(group_rows.size()) + " groups");
  int64_t total = 0;
  for (const int64_t rows : group_rows) {
    if (rows < 0) fail(op, "group rows must be >= 0");
    total += rows;
  }
  return total;
}

}  // namespace

void Backend::grouped_linear_forward(ConstFloatView x, std::span<const ConstFloatView> w,
                                     std::span<const ConstFloatView> bias, std::span<const int64_t> group_rows,
                                     int64_t in, int64_t out, FloatView y) {
  constexpr BackendOp op = BackendOp::grouped_linear_forward;
  dims(op, {in, out});
  const int64_t rows = grouped_rows(op, group_rows, w.size(), "w");
  if (!bias.empty()) grouped_rows(op, group_rows, bias.size(), "bias");
  expect(x, rows * in, op, "x");
  expect(y, rows * out, op, "y");
  for (const ConstFloatView& wg : w) expect(wg, out * in, op, "w");
  for (const ConstFloatView& bg : bias) expect(bg, out, op, "bias");
  if (rows == 0 || out == 0) return;
  Fp32Staging st(*this, op);
  std::vector<ConstFloatView> ws, bs;
  for (const ConstFloatView& wg : w) ws.push_back(st.in(wg));
  for (const ConstFloatView& bg : bias) bs.push_back(st.in(bg));
  do_grouped_linear_forward(st.in(x), ws, bs, group_rows, in, out, st.out(y));
  st.finish();
}

void Backend::do_grouped_linear_forward(ConstFloatView x, std::span<const ConstFloatView> w,
                                        std::span<const ConstFloatView> bias, std::span<const int64_t> group_rows,
                                        int64_t in, int64_t out, FloatView y) {
  int64_t first = 0;
  for (size_t g = 0; g < group_rows.size(); ++g) {
    const int64_t rows = group_rows[g];
    if (rows > 0)
      do_linear_forward(x.subspan(first * in, rows * in), w[g], bias.empty() ? ConstFloatView() : bias[g], rows, in,
                        out, y.subspan(first * out, rows * out));
    first += rows;
  }
}

void Backend::grouped_linear_backward_input(ConstFloatView dy, std::span<const ConstFloatView> w,
                                            std::span<const int64_t> group_rows, int64_t in, int64_t out,
                                            FloatView dx) {
  constexpr BackendOp op = BackendOp::grouped_linear_backward_input;
  dims(op, {in, out});
  const int64_t rows = grouped_rows(op, group_rows, w.size(), "w");
  expect(dy, rows * out, op, "dy");
  expect(dx, rows * in, op, "dx");
  for (const ConstFloatView& wg : w) expect(wg, out * in, op, "w");
  if (rows == 0 || in == 0) return;
  Fp32Staging st(*this, op);
  std::vector<ConstFloatView> ws;
  for (const ConstFloatView& wg : w) ws.push_back(st.in(wg));
  do_grouped_linear_backward_input(st.in(dy), ws, group_rows, in, out, st.out(dx));
  st.finish();
}

void Backend::do_grouped_linear_backward_input(ConstFloatView dy, std::span<const ConstFloatView> w,
                                               std::span<const int64_t> group_rows, int64_t in, int64_t out,
                                               FloatView dx) {
  int64_t first = 0;
  for (size_t g = 0; g < group_rows.size(); ++g) {
    const int64_t rows = group_rows[g];
    if (rows > 0)
      do_linear_backward_input(dy.subspan(first * out, rows * out), w[g], rows, in, out,
                               dx.subspan(first * in, rows * in));
    first += rows;
  }
}

void Backend::grouped_linear_backward_weight(ConstFloatView dy, ConstFloatView x, std::span<const int64_t> group_rows,
                                             int64_t in, int64_t out, std::span<const FloatView> dw,
                                             bool accumulate) {
  constexpr BackendOp op = BackendOp::grouped_linear_backward_weight;
  dims(op, {in, out});
  const int64_t rows = grouped_rows(op, group_rows, dw.size(), "dw");
  expect(dy, rows * out, op, "dy");
  expect(x, rows * in, op, "x");
  for (const FloatView& dwg : dw) expect(dwg, out * in, op, "dw");
  if (in == 0 || out == 0) return;
  // A group of no rows adds nothing, and written over is zero.
  if (!accumulate) {
    for (size_t g = 0; g < group_rows.size(); ++g)
      if (group_rows[g] == 0) fill(dw[g], 0.0f);
  }
  if (rows == 0) return;
  Fp32Staging st(*this, op);
  std::vector<FloatView> dws;
  for (const FloatView& dwg : dw) dws.push_back(accumulate ? st.inout(dwg) : st.out(dwg));
  do_grouped_linear_backward_weight(st.in(dy), st.in(x), group_rows, in, out, dws, accumulate);
  st.finish();
}

void Backend::do_grouped_linear_backward_weight(ConstFloatView dy, ConstFloatView x,
                                                std::span<const int64_t> group_rows, int64_t in, int64_t out,
                                                std::span<const FloatView> dw, bool accumulate) {
  int64_t first = 0;
  for (size_t g = 0; g < group_rows.size(); ++g) {
    const int64_t rows = group_rows[g];
    if (rows > 0)
      do_linear_backward_weight(dy.subspan(first * out, rows * out), x.subspan(first * in, rows * in), rows, in, out,
                                dw[g], accumulate);
    first += rows;
  }
}

void Backend::layer_norm_forward(ConstFloatView x, ConstFloatView weight, ConstFloatView bias,
                                 int64_t rows, int64_t hidden, float eps, FloatView y,
                                 FloatView mean, FloatView rstd) {
  constexpr BackendOp op = BackendOp::layer_norm_forward;
  dims(op, {rows, hidden});
  expect(x, rows * hidden, op, "x");
  expect(weight, hidden, op, "weight");
  expect_optional(bias, hidden, op, "bias");
  expect(y, rows * hidden, op, "y");
  expect(mean, rows, op, "mean");
  expect(rstd, rows, op, "rstd");
  Fp32Staging st(*this, op);
  do_layer_norm_forward(st.in(x), st.in(weight), st.in(bias), rows, hidden, eps, st.out(y),
                        st.out(mean), st.out(rstd));
  st.finish();
}

void Backend::add_norm_forward(ConstFloatView a, ConstFloatView b, FloatView sum, ConstFloatView weight,
                               ConstFloatView bias, int64_t rows, int64_t hidden, float eps, FloatView y,
                               FloatView mean, FloatView rstd, ConstFloatView c) {
  constexpr BackendOp op = BackendOp::add_norm_forward;
  dims(op, {rows, hidden});
  expect(a, rows * hidden, op, "a");
  expect(b, rows * hidden, op, "b");
  expect_optional(c, rows * hidden, op, "c");
  expect(sum, rows * hidden, op, "sum");
  expect(weight, hidden, op, "weight");
  expect_optional(bias, hidden, op, "bias");
  expect(y, rows * hidden, op, "y");
  expect_optional(mean, rows, op, "mean");
  expect(rstd, rows, op, "rstd");
  if (mean.empty() && !bias.empty()) fail(op, "RMSNorm (no mean) takes no bias");
  do_add_norm_forward(a, b, c, sum, weight, bias, rows, hidden, eps, y, mean, rstd);
}

void Backend::do_add_norm_forward(ConstFloatView a, ConstFloatView b, ConstFloatView c, FloatView sum,
                                  ConstFloatView weight, ConstFloatView bias, int64_t rows, int64_t hidden,
                                  float eps, FloatView y, FloatView mean, FloatView rstd) {
  add(a, b, sum, c);
  if (mean.empty()) {
    rms_norm_forward(sum, weight, rows, hidden, eps, y, rstd);
  } else {
    layer_norm_forward(sum, weight, bias, rows, hidden, eps, y, mean, rstd);
  }
}

void Backend::layer_norm_backward(ConstFloatView dy, ConstFloatView x, ConstFloatView weight,
                                  ConstFloatView mean, ConstFloatView rstd, int64_t rows,
                                  int64_t hidden, FloatView dx, FloatView dweight,
                                  FloatView dbias, bool accumulate_dx, bool accumulate_params) {
  constexpr BackendOp op = BackendOp::layer_norm_backward;
  dims(op, {rows, hidden});
  expect(dy, rows * hidden, op, "dy");
  expect(x, rows * hidden, op, "x");
  expect(weight, hidden, op, "weight");
  expect(mean, rows, op, "mean");
  expect(rstd, rows, op, "rstd");
  expect(dx, rows * hidden, op, "dx");
  expect(dweight, hidden, op, "dweight");
  expect_optional(dbias, hidden, op, "dbias");
  if (rows == 0) {
    if (!accumulate_params) {
      fill(dweight, 0.0f);
      if (!dbias.empty()) fill(dbias, 0.0f);
    }
    return;
  }
  Fp32Staging st(*this, op);
  const auto params_out = [&](FloatView v) { return accumulate_params ? st.inout(v) : st.out(v); };
  do_layer_norm_backward(st.in(dy), st.in(x), st.in(weight), st.in(mean), st.in(rstd), rows, hidden,
                         accumulate_dx ? st.inout(dx) : st.out(dx), params_out(dweight), params_out(dbias),
                         accumulate_dx, accumulate_params);
  st.finish();
}

void Backend::rms_norm_forward(ConstFloatView x, ConstFloatView weight, int64_t rows,
                               int64_t hidden, float eps, FloatView y, FloatView rstd) {
  constexpr BackendOp op = BackendOp::rms_norm_forward;
  dims(op, {rows, hidden});
  expect(x, rows * hidden, op, "x");
  expect(weight, hidden, op, "weight");
  expect(y, rows * hidden, op, "y");
  expect(rstd, rows, op, "rstd");
  Fp32Staging st(*this, op);
  do_rms_norm_forward(st.in(x), st.in(weight), rows, hidden, eps, st.out(y), st.out(rstd));
  st.finish();
}

void Backend::rms_norm_backward(ConstFloatView dy, ConstFloatView x, ConstFloatView weight,
                                ConstFloatView rstd, int64_t rows, int64_t hidden, FloatView dx,
                                FloatView dweight, bool accumulate_dx, bool accumulate_params) {
  constexpr BackendOp op = BackendOp::rms_norm_backward;
  dims(op, {rows, hidden});
  expect(dy, rows * hidden, op, "dy");
  expect(x, rows * hidden, op, "x");
  expect(weight, hidden, op, "weight");
  expect(rstd, rows, op, "rstd");
  expect(dx, rows * hidden, op, "dx");
  expect(dweight, hidden, op, "dweight");
  if (rows == 0) {
    if (!accumulate_params) fill(dweight, 0.0f);
    return;
  }
  Fp32Staging st(*this, op);
  do_rms_norm_backward(st.in(dy), st.in(x), st.in(weight), st.in(rstd), rows, hidden,
                       accumulate_dx ? st.inout(dx) : st.out(dx), accumulate_params ? st.inout(dweight) : st.out(dweight),
                       accumulate_dx, accumulate_params);
  st.finish();
}

void Backend::gelu_forward(ConstFloatView x, FloatView y) {
  constexpr BackendOp op = BackendOp::gelu_forward;
  expect(y, x.size(), op, "y");
  if (x.size() > 0) {
    Fp32Staging st(*this, op);
    do_gelu_forward(st.in(x), x.size(), st.out(y));
    st.finish();
  }
}

void Backend::gelu_backward(ConstFloatView dy, ConstFloatView x, FloatView dx) {
  constexpr BackendOp op = BackendOp::gelu_backward;
  expect(dy, x.size(), op, "dy");
  expect(dx, x.size(), op, "dx");
  if (x.size() > 0) {
    Fp32Staging st(*this, op);
    do_gelu_backward(st.in(dy), st.in(x), x.size(), st.out(dx));
    st.finish();
  }
}

void Backend::squared_relu_forward(ConstFloatView x, FloatView y) {
  constexpr BackendOp op = BackendOp::squared_relu_forward;
  expect(y, x.size(), op, "y");
  if (x.size() > 0) {
    Fp32Staging st(*this, op);
    do_squared_relu_forward(st.in(x), x.size(), st.out(y));
    st.finish();
  }
}

void Backend::squared_relu_backward(ConstFloatView dy, ConstFloatView x, FloatView dx) {
  constexpr BackendOp op = BackendOp::squared_relu_backward;
  expect(dy, x.size(), op, "dy");
  expect(dx, x.size(), op, "dx");
  if (x.size() > 0) {
    Fp32Staging st(*this, op);
    do_squared_relu_backward(st.in(dy), st.in(x), x.size(), st.out(dx));
    st.finish();
  }
}

void Backend::gelu_tanh_forward(ConstFloatView x, FloatView y) {
  constexpr BackendOp op = BackendOp::gelu_tanh_forward;
  expect(y, x.size(), op, "y");
  if (x.size() > 0) {
    Fp32Staging st(*this, op);
    do_gelu_tanh_forward(st.in(x), x.size(), st.out(y));
    st.finish();
  }
}

void Backend::gelu_tanh_backward(ConstFloatView dy, ConstFloatView x, FloatView dx) {
  constexpr BackendOp op = BackendOp::gelu_tanh_backward;
  expect(dy, x.size(), op, "dy");
  expect(dx, x.size(), op, "dx");
  if (x.size() > 0) {
    Fp32Staging st(*this, op);
    do_gelu_tanh_backward(st.in(dy), st.in(x), x.size(), st.out(dx));
    st.finish();
  }
}

void Backend::swiglu_forward(ConstFloatView x, int64_t rows, int64_t ffn, FloatView y) {
  constexpr BackendOp op = BackendOp::swiglu_forward;
  dims(op, {rows, ffn});
  expect(x, rows * 2 * ffn, op, "x");
  expect(y, rows * ffn, op, "y");
  Fp32Staging st(*this, op);
  do_swiglu_forward(st.in(x), rows, ffn, st.out(y));
  st.finish();
}

void Backend::swiglu_backward(ConstFloatView dy, ConstFloatView x, int64_t rows, int64_t ffn,
                              FloatView dx) {
  constexpr BackendOp op = BackendOp::swiglu_backward;
  dims(op, {rows, ffn});
  expect(dy, rows * ffn, op, "dy");
  expect(x, rows * 2 * ffn, op, "x");
  expect(dx, rows * 2 * ffn, op, "dx");
  Fp32Staging st(*this, op);
  do_swiglu_backward(st.in(dy), st.in(x), rows, ffn, st.out(dx));
  st.finish();
}

void Backend::dropout_forward(ConstFloatView x, float p, DropoutKey key, FloatView y) {
  constexpr BackendOp op = BackendOp::dropout_forward;
  expect(y, x.size(), op, "y");
  if (x.size() > 0) {
    Fp32Staging st(*this, op);
    do_dropout_forward(st.in(x), x.size(), p, key, st.out(y));
    st.finish();
  }
}

void Backend::dropout_backward(ConstFloatView dy, float p, DropoutKey key, FloatView dx) {
  constexpr BackendOp op = BackendOp::dropout_backward;
  expect(dx, dy.size(), op, "dx");
  if (dy.size() > 0) {
    Fp32Staging st(*this, op);
    do_dropout_backward(st.in(dy), dy.size(), p, key, st.out(dx));
    st.finish();
  }
}

void Backend::uniform_jitter(ConstFloatView x, float eps, DropoutKey key, FloatView y) {
  constexpr BackendOp op = BackendOp::uniform_jitter;
  expect(y, x.size(), op, "y");
  if (!(eps >= 0.0f && eps < 1.0f)) fail(op, "eps must be in [0, 1)");
  if (x.size() > 0) {
    Fp32Staging st(*this, op);
    do_uniform_jitter(st.in(x), x.size(), eps, key, st.out(y));
    st.finish();
  }
}

void Backend::standard_normal(DropoutKey key, FloatView y) {
  if (y.empty()) return;
  Fp32Staging st(*this, BackendOp::standard_normal);
  do_standard_normal(y.size(), key, st.out(y));
  st.finish();
}

void Backend::embedding_forward(ConstIndexView ids, ConstFloatView table, int64_t vocab_start,
                                int64_t hidden, FloatView out) {
  constexpr BackendOp op = BackendOp::embedding_forward;
  dims(op, {vocab_start, hidden});
  if (hidden == 0 || table.size() % hidden != 0) fail(op, "table is not [rows, hidden]");
  expect(out, ids.size() * hidden, op, "out");
  Fp32Staging st(*this, op);
  do_embedding_forward(ids.data(), ids.size(), st.in(table), vocab_start, table.size() / hidden,
                       hidden, st.out(out));
  st.finish();
}

void Backend::embedding_backward(ConstIndexView ids, ConstFloatView dout, int64_t vocab_start,
                                 int64_t hidden, FloatView dtable) {
  constexpr BackendOp op = BackendOp::embedding_backward;
  dims(op, {vocab_start, hidden});
  if (hidden == 0 || dtable.size() % hidden != 0) fail(op, "dtable is not [rows, hidden]");
  expect(dout, ids.size() * hidden, op, "dout");
  Fp32Staging st(*this, op);
  do_embedding_backward(ids.data(), ids.size(), st.in(dout), vocab_start, dtable.size() / hidden,
                        hidden, st.inout(dtable));
  st.finish();
}

void Backend::rotary_forward(ConstFloatView x, const HeadTensor& shape, const RotaryParams& params,
                             FloatView y) {
  constexpr BackendOp op = BackendOp::rotary_forward;
  expect(x, shape.elements(), op, "x");
  expect(y, shape.elements(), op, "y");
  Fp32Staging st(*this, op);
  do_rotary_forward(st.in(x), shape, params, st.out(y));
  st.finish();
}

void Backend::rotary_backward(ConstFloatView dy, const HeadTensor& shape,
                              const RotaryParams& params, FloatView dx) {
  constexpr BackendOp op = BackendOp::rotary_backward;
  expect(dy, shape.elements(), op, "dy");
  expect(dx, shape.elements(), op, "dx");
  Fp32Staging st(*this, op);
  do_rotary_backward(st.in(dy), shape, params, st.out(dx));
  st.finish();
}

void Backend::attention_forward(ConstFloatView q, ConstFloatView k, ConstFloatView v,
                                const AttentionShape& shape, const AttentionParams& params,
                                FloatView out, FloatView lse) {
  constexpr BackendOp op = BackendOp::attention_forward;
  const int64_t q_size = shape.query().elements();
  const int64_t kv_size = shape.key_value().elements();
  expect(q, q_size, op, "q");
  expect(k, kv_size, op, "k");
  expect(v, kv_size, op, "v");
  expect(out, q_size, op, "out");
  expect(lse, shape.batch * shape.heads * shape.seq_q, op, "lse");
  Fp32Staging st(*this, op);
  do_attention_forward(st.in(q), st.in(k), st.in(v), shape, params, st.out(out), st.out(lse));
  st.finish();
}

void Backend::attention_backward(ConstFloatView q, ConstFloatView k, ConstFloatView v,
                                 ConstFloatView out, ConstFloatView dout, ConstFloatView lse,
                                 const AttentionShape& shape, const AttentionParams& params,
                                 FloatView dq, FloatView dk, FloatView dv) {
  constexpr BackendOp op = BackendOp::attention_backward;
  const int64_t q_size = shape.query().elements();
  const int64_t kv_size = shape.key_value().elements();
  expect(q, q_size, op, "q");
  expect(k, kv_size, op, "k");
  expect(v, kv_size, op, "v");
  expect(out, q_size, op, "out");
  expect(dout, q_size, op, "dout");
  expect(lse, shape.batch * shape.heads * shape.seq_q, op, "lse");
  expect(dq, q_size, op, "dq");
  expect(dk, kv_size, op, "dk");
  expect(dv, kv_size, op, "dv");
  Fp32Staging st(*this, op);
  do_attention_backward(st.in(q), st.in(k), st.in(v), st.in(out), st.in(dout), st.in(lse), shape,
                        params, st.out(dq), st.out(dk), st.out(dv));
  st.finish();
}

void Backend::cached_attention(FloatView q, FloatView k, ConstFloatView v, FloatView key_cache,
                               FloatView value_cache, ConstIndexView length, const AttentionShape& shape,
                               const RotaryParams* rotary, float softmax_scale, FloatView out) {
  constexpr BackendOp op = BackendOp::cached_attention;
  dims(op, {shape.batch, shape.seq_q, shape.seq_kv, shape.heads, shape.groups, shape.head_dim});
  if (shape.groups == 0 || shape.heads % shape.groups != 0) fail(op, "groups must divide heads");
  if (shape.seq_q < 1 || shape.seq_q > shape.seq_kv) fail(op, "seq_q must be in [1, the cache's capacity]");
  if (shape.layout != SeqLayout::kSeqMajor) fail(op, "the cache is sequence-major");
  if (rotary != nullptr && (rotary->rotary_dim <= 0 || rotary->rotary_dim % 2 != 0 || rotary->rotary_dim > shape.head_dim))
    fail(op, "rotary_dim must be even and in (0, head_dim]");
  const int64_t new_kv = shape.seq_q * shape.batch * shape.groups * shape.head_dim;
  expect(q, shape.query().elements(), op, "q");
  expect(k, new_kv, op, "k");
  expect(v, new_kv, op, "v");
  expect(key_cache, shape.key_value().elements(), op, "key_cache");
  expect(value_cache, shape.key_value().elements(), op, "value_cache");
  expect(length, 1, op, "length");
  expect(out, shape.query().elements(), op, "out");
  if (k.type() != key_cache.type() || v.type() != value_cache.type())
    fail(op, "new keys and values must have their cache's type");
  do_cached_attention(q, k, v, key_cache, value_cache, length, shape, rotary, softmax_scale, out);
}

void Backend::do_cached_attention(FloatView q, FloatView k, ConstFloatView v, FloatView key_cache,
                                  FloatView value_cache, ConstIndexView length, const AttentionShape& shape,
                                  const RotaryParams* rotary, float softmax_scale, FloatView out) {
  int64_t past = 0;
  copy_to_host(length, std::span<int64_t>(&past, 1));
  if (past < 0 || past + shape.seq_q > shape.seq_kv)
    fail(BackendOp::cached_attention, std::to_string(past) + " cached + " + std::to_string(shape.seq_q) +
                                 " new positions exceed the capacity of " + std::to_string(shape.seq_kv));
  if (rotary != nullptr) {
    RotaryParams at = *rotary;
    at.position_offset += past;
    rotary_forward(q, shape.query(), at, q);
    rotary_forward(k, {shape.seq_q, shape.batch, shape.groups, shape.head_dim, SeqLayout::kSeqMajor}, at, k);
  }
  const int64_t per_position = shape.batch * shape.groups * shape.head_dim;
  copy(k, key_cache.subspan(past * per_position, shape.seq_q * per_position));
  copy(v, value_cache.subspan(past * per_position, shape.seq_q * per_position));
  AttentionShape visible = shape;
  visible.seq_kv = past + shape.seq_q;
  AttentionParams params;
  params.softmax_scale = softmax_scale;
  DeviceBuffer lse(*this, shape.batch * shape.heads * shape.seq_q);
  attention_forward(q, key_cache.first(visible.seq_kv * per_position), value_cache.first(visible.seq_kv * per_position),
                    visible, params, out, lse.view());
}

namespace {

void expect_fused_qkv(const AttentionShape& shape, BackendOp op) {
  if (shape.groups != shape.heads) fail(op, "the fused QKV layout is read with groups == heads only");
  if (shape.layout != SeqLayout::kSeqMajor) fail(op, "the fused QKV layout is seq-major");
}

}  // namespace

void Backend::attention_merge(ConstFloatView part_out, ConstFloatView part_lse, const HeadTensor& whole,
                              int64_t first_row, int64_t part_rows, FloatView out, FloatView lse) {
  constexpr BackendOp op = BackendOp::attention_merge;
  if (first_row < 0 || part_rows < 0 || first_row + part_rows > whole.seq)
    fail(op, "rows [" + std::to_string(first_row) + ", " + std::to_string(first_row + part_rows) +
                 ") are not within the " + std::to_string(whole.seq) + " rows of out");
  HeadTensor part = whole;
  part.seq = part_rows;
  expect(part_out, part.elements(), op, "part_out");
  expect(part_lse, whole.batch * whole.heads * part_rows, op, "part_lse");
  expect(out, whole.elements(), op, "out");
  expect(lse, whole.batch * whole.heads * whole.seq, op, "lse");
  if (part_rows == 0) return;
  Fp32Staging st(*this, op);
  do_attention_merge(st.in(part_out), st.in(part_lse), whole, first_row, part_rows, st.inout(out), st.inout(lse));
  st.finish();
}

void Backend::attention_forward_fused_qkv(ConstFloatView mixed, const AttentionShape& shape,
                                          const AttentionParams& params, FloatView out, FloatView lse) {
  constexpr BackendOp op = BackendOp::attention_forward_fused_qkv;
  expect_fused_qkv(shape, op);
  const int64_t q_size = shape.query().elements();
  expect(mixed, 3 * q_size, op, "mixed");
  expect(out, q_size, op, "out");
  expect(lse, shape.batch * shape.heads * shape.seq_q, op, "lse");
  if (mixed.type() != out.type()) fail(op, "mixed and out differ in type");
  do_attention_forward_fused_qkv(mixed, shape, params, out, lse);
}

void Backend::attention_backward_fused_qkv(ConstFloatView mixed, ConstFloatView out, ConstFloatView dout,
                                           ConstFloatView lse, const AttentionShape& shape,
                                           const AttentionParams& params, FloatView d_mixed) {
  constexpr BackendOp op = BackendOp::attention_backward_fused_qkv;
  expect_fused_qkv(shape, op);
  const int64_t q_size = shape.query().elements();
  expect(mixed, 3 * q_size, op, "mixed");
  expect(out, q_size, op, "out");
  expect(dout, q_size, op, "dout");
  expect(lse, shape.batch * shape.heads * shape.seq_q, op, "lse");
  expect(d_mixed, 3 * q_size, op, "d_mixed");
  if (mixed.type() != d_mixed.type() || out.type() != dout.type()) fail(op, "operands differ in type");
  do_attention_backward_fused_qkv(mixed, out, dout, lse, shape, params, d_mixed);
}

void Backend::do_attention_forward_fused_qkv(ConstFloatView mixed, const AttentionShape& shape,
                                             const AttentionParams& params, FloatView out, FloatView lse) {
  const int64_t n = shape.query().elements();
  DeviceBuffer q(*this, n, mixed.type()), k(*this, n, mixed.type()), v(*this, n, mixed.type());
  qkv_split(mixed, shape.batch * shape.seq_q, shape.heads, shape.groups, shape.head_dim, q.view(), k.view(),
            v.view());
  attention_forward(q.view(), k.view(), v.view(), shape, params, out, lse);
}

void Backend::do_attention_backward_fused_qkv(ConstFloatView mixed, ConstFloatView out, ConstFloatView dout,
                                              ConstFloatView lse, const AttentionShape& shape,
                                              const AttentionParams& params, FloatView d_mixed) {
  const int64_t n = shape.query().elements();
  const int64_t tokens = shape.batch * shape.seq_q;
  const FloatType type = mixed.type();
  DeviceBuffer q(*this, n, type), k(*this, n, type), v(*this, n, type);
  DeviceBuffer dq(*this, n, type), dk(*this, n, type), dv(*this, n, type);
  qkv_split(mixed, tokens, shape.heads, shape.groups, shape.head_dim, q.view(), k.view(), v.view());
  attention_backward(q.view(), k.view(), v.view(), out, dout, lse, shape, params, dq.view(), dk.view(), dv.view());
  qkv_merge(dq.view(), dk.view(), dv.view(), tokens, shape.heads, shape.groups, shape.head_dim, d_mixed);
}

void Backend::qkv_split(ConstFloatView mixed, int64_t tokens, int64_t heads, int64_t groups,
                        int64_t unit, FloatView q, FloatView k, FloatView v) {
  constexpr BackendOp op = BackendOp::qkv_split;
  dims(op, {tokens, heads, groups, unit});
  expect(mixed, tokens * (heads + 2 * groups) * unit, op, "mixed");
  expect(q, tokens * heads * unit, op, "q");
  expect(k, tokens * groups * unit, op, "k");
  expect(v, tokens * groups * unit, op, "v");
  Fp32Staging st(*this, op);
  do_qkv_split(st.in(mixed), tokens, heads, groups, unit, st.out(q), st.out(k), st.out(v));
  st.finish();
}

void Backend::qkv_merge(ConstFloatView q, ConstFloatView k, ConstFloatView v, int64_t tokens,
                        int64_t heads, int64_t groups, int64_t unit, FloatView mixed) {
  constexpr BackendOp op = BackendOp::qkv_merge;
  dims(op, {tokens, heads, groups, unit});
  expect(mixed, tokens * (heads + 2 * groups) * unit, op, "mixed");
  expect(q, tokens * heads * unit, op, "q");
  expect(k, tokens * groups * unit, op, "k");
  expect(v, tokens * groups * unit, op, "v");
  Fp32Staging st(*this, op);
  do_qkv_merge(st.in(q), st.in(k), st.in(v), tokens, heads, groups, unit, st.out(mixed));
  st.finish();
}

void Backend::cross_entropy_shard_statistics(ConstFloatView logits, ConstIndexView targets,
                                             int64_t rows, int64_t vocab, int64_t vocab_start,
                                             FloatView statistics) {
  constexpr BackendOp op = BackendOp::cross_entropy_shard_statistics;
  dims(op, {rows, vocab, vocab_start});
  expect(logits, rows * vocab, op, "logits");
  expect(targets, rows, op, "targets");
  expect(statistics, 3 * rows, op, "statistics");
  if (!statistics.is_fp32()) fail(op, "statistics must be fp32");
  if (rows == 0) return;
  Fp32Staging st(*this, op);
  do_cross_entropy_shard_statistics(st.in(logits), targets.data(), rows, vocab, vocab_start,
                                    st.out(statistics));
  st.finish();
}

void Backend::cross_entropy_combine(ConstFloatView statistics, int64_t ranks, int64_t rows,
                                    FloatView loss, FloatView row_max, FloatView sum_exp) {
  constexpr BackendOp op = BackendOp::cross_entropy_combine;
  dims(op, {ranks, rows});
  if (ranks < 1) fail(op, "ranks must be at least 1");
  expect(statistics, ranks * 3 * rows, op, "statistics");
  expect(loss, rows, op, "loss");
  expect(row_max, rows, op, "row_max");
  expect(sum_exp, rows, op, "sum_exp");
  if (rows == 0) return;
  Fp32Staging st(*this, op);
  do_cross_entropy_combine(st.in(statistics), ranks, rows, st.out(loss), st.out(row_max),
                           st.out(sum_exp));
  st.finish();
}

void Backend::cross_entropy_forward(ConstFloatView logits, ConstIndexView targets, int64_t rows,
                                    int64_t vocab, FloatView loss, FloatView row_max,
                                    FloatView sum_exp) {
  constexpr BackendOp op = BackendOp::cross_entropy_forward;
  dims(op, {rows, vocab});
  expect(logits, rows * vocab, op, "logits");
  expect(targets, rows, op, "targets");
  expect(loss, rows, op, "loss");
  expect(row_max, rows, op, "row_max");
  expect(sum_exp, rows, op, "sum_exp");
  Fp32Staging st(*this, op);
  do_cross_entropy_forward(st.in(logits), targets.data(), rows, vocab, st.out(loss), st.out(row_max),
                           st.out(sum_exp));
  st.finish();
}

void Backend::cross_entropy_backward(ConstFloatView logits, ConstIndexView targets,
                                     ConstFloatView row_max, ConstFloatView sum_exp,
                                     ConstFloatView dloss, int64_t rows, int64_t vocab,
                                     int64_t vocab_start, FloatView dlogits) {
  constexpr BackendOp op = BackendOp::cross_entropy_backward;
  dims(op, {rows, vocab, vocab_start});
  expect(logits, rows * vocab, op, "logits");
  expect(targets, rows, op, "targets");
  expect(row_max, rows, op, "row_max");
  expect(sum_exp, rows, op, "sum_exp");
  expect(dloss, rows, op, "dloss");
  expect(dlogits, rows * vocab, op, "dlogits");
  Fp32Staging st(*this, op);
  do_cross_entropy_backward(st.in(logits), targets.data(), st.in(row_max), st.in(sum_exp),
                            st.in(dloss), rows, vocab, vocab_start, st.out(dlogits));
  st.finish();
}

void Backend::cross_entropy_forward_backward(FloatView logits, ConstIndexView targets,
                                             ConstFloatView dloss, int64_t rows, int64_t vocab,
                                             FloatView loss) {
  constexpr BackendOp op = BackendOp::cross_entropy_forward_backward;
  dims(op, {rows, vocab});
  expect(logits, rows * vocab, op, "logits");
  expect(targets, rows, op, "targets");
  expect(dloss, rows, op, "dloss");
  expect(loss, rows, op, "loss");
  if (!dloss.is_fp32() || !loss.is_fp32()) fail(op, "dloss and loss must be fp32");
  if (rows > 0) do_cross_entropy_forward_backward(logits, targets, dloss, rows, vocab, loss);
}

void Backend::do_cross_entropy_forward_backward(FloatView logits, ConstIndexView targets,
                                                ConstFloatView dloss, int64_t rows, int64_t vocab,
                                                FloatView loss) {
  DeviceBuffer row_max(*this, rows);
  DeviceBuffer sum_exp(*this, rows);
  cross_entropy_forward(logits, targets, rows, vocab, loss, row_max.view(), sum_exp.view());
  cross_entropy_backward(logits, targets, row_max.view(), sum_exp.view(), dloss, rows, vocab, 0,
                         logits);
}

MaskedLossSum Backend::masked_loss_sum(ConstFloatView loss, ConstFloatView loss_mask) {
  constexpr BackendOp op = BackendOp::masked_loss_sum;
  expect(loss_mask, loss.size(), op, "loss_mask");
  if (loss.empty()) return {};
  Fp32Staging st(*this, op);
  const auto result = do_masked_loss_sum(st.in(loss), st.in(loss_mask), loss.size());
  st.finish();
  return result;
}

void Backend::masked_loss_sum_on_device(ConstFloatView loss, ConstFloatView loss_mask, DeviceSpan<double> sums,
                                        bool accumulate) {
  constexpr BackendOp op = BackendOp::masked_loss_sum_on_device;
  expect(loss_mask, loss.size(), op, "loss_mask");
  if (sums.size() != 2) fail(op, "sums must hold 2 values, not " + std::to_string(sums.size()));
  Fp32Staging st(*this, op);
  do_masked_loss_sum_on_device(st.in(loss), st.in(loss_mask), loss.size(), sums.data(), accumulate);
  st.finish();
}

void Backend::do_masked_loss_sum_on_device(ConstFloatArg loss, ConstFloatArg loss_mask, int64_t rows, double* sums,
                                           bool accumulate) {
  const MaskedLossSum s = rows > 0 ? do_masked_loss_sum(loss, loss_mask, rows) : MaskedLossSum{};
  sums[0] = accumulate ? sums[0] + s.loss_sum : s.loss_sum;
  sums[1] = accumulate ? sums[1] + s.tokens : s.tokens;
}

void Backend::masked_loss_grad(ConstFloatView loss_mask, float scale, FloatView dloss) {
  constexpr BackendOp op = BackendOp::masked_loss_grad;
  expect(dloss, loss_mask.size(), op, "dloss");
  if (dloss.size() > 0) {
    Fp32Staging st(*this, op);
    do_masked_loss_grad(st.in(loss_mask), dloss.size(), scale, st.out(dloss));
    st.finish();
  }
}

void Backend::row_argmax(ConstFloatView x, int64_t rows, int64_t cols, IndexView out, int64_t row_stride) {
  constexpr BackendOp op = BackendOp::row_argmax;
  dims(op, {rows, cols, row_stride});
  if (row_stride == 0) row_stride = cols;
  if (row_stride < cols) fail(op, "row_stride must be >= cols");
  expect(x, rows * row_stride, op, "x");
  expect(out, rows, op, "out");
  if (rows > 0 && cols > 0) {
    Fp32Staging st(*this, op);
    do_row_argmax(st.in(x), rows, cols, row_stride, out.data());
    st.finish();
  }
}

void Backend::moe_route(ConstFloatView logits, const MoeRoutingParams& p, FloatView gates, FloatView probs,
                        FloatView routing_map, FloatView aux_counts, DeviceSpan<double> statistics, bool accumulate) {
  constexpr BackendOp op = BackendOp::moe_route;
  dims(op, {p.tokens, p.experts, p.aux_groups});
  if (p.experts < 1 || p.topk < 1 || p.topk > p.experts) fail(op, "needs 1 <= topk <= experts");
  if (p.group_topk > 0 && (p.num_groups < 1 || p.experts % p.num_groups != 0 || p.group_topk > p.num_groups ||
                           p.topk > p.group_topk * (p.experts / p.num_groups)))
    fail(op, "group-limited routing needs groups dividing the experts and topk within the chosen groups");
  if (p.aux_groups > 0 && p.tokens % p.aux_groups != 0) fail(op, "tokens must be a multiple of aux_groups");
  if (p.aux_partitions < 1) fail(op, "aux_partitions must be >= 1");
  const int64_t n = p.tokens * p.experts;
  expect(logits, n, op, "logits");
  expect(gates, n, op, "gates");
  expect(probs, n, op, "probs");
  expect(routing_map, n, op, "routing_map");
  expect(aux_counts, p.aux_groups * p.experts, op, "aux_counts");
  expect(statistics, 2, op, "statistics");
  if (p.tokens == 0) return;
  Fp32Staging st(*this, op);
  // The second pass of a partitioned auxiliary loss reads the summed counts and leaves the
  // routing outputs as they are (staged both ways, so that a staged copy does not replace them).
  const auto stage = [&](FloatView view) { return p.aux_from_counts ? st.inout(view) : st.out(view); };
  do_moe_route(st.in(logits), p, stage(gates), stage(probs), stage(routing_map), stage(aux_counts),
               statistics.data(), accumulate);
  st.finish();
}

void Backend::moe_route_backward(ConstFloatView logits, const MoeRoutingParams& p, ConstFloatView d_probs,
                                 ConstFloatView routing_map, ConstFloatView aux_counts, float aux_grad, float z_grad,
                                 FloatView d_logits) {
  constexpr BackendOp op = BackendOp::moe_route_backward;
  dims(op, {p.tokens, p.experts, p.aux_groups});
  if (p.experts < 1 || p.topk < 1 || p.topk > p.experts) fail(op, "needs 1 <= topk <= experts");
  if (p.aux_groups > 0 && p.tokens % p.aux_groups != 0) fail(op, "tokens must be a multiple of aux_groups");
  if (p.aux_partitions < 1) fail(op, "aux_partitions must be >= 1");
  const int64_t n = p.tokens * p.experts;
  expect(logits, n, op, "logits");
  expect(d_probs, n, op, "d_probs");
  expect(routing_map, n, op, "routing_map");
  expect(aux_counts, p.aux_groups * p.experts, op, "aux_counts");
  expect(d_logits, n, op, "d_logits");
  if (p.tokens == 0) return;
  Fp32Staging st(*this, op);
  do_moe_route_backward(st.in(logits), p, st.in(d_probs), st.in(routing_map), st.in(aux_counts), aux_grad, z_grad,
                        st.out(d_logits));
  st.finish();
}

void Backend::moe_sinkhorn(ConstFloatView logits, int64_t tokens, int64_t experts, FloatView out) {
  constexpr BackendOp op = BackendOp::moe_sinkhorn;
  dims(op, {tokens, experts});
  if (experts < 1) fail(op, "needs experts >= 1");
  expect(logits, tokens * experts, op, "logits");
  expect(out, tokens * experts, op, "out");
  if (tokens == 0) return;
  Fp32Staging st(*this, op);
  do_moe_sinkhorn(st.in(logits), tokens, experts, st.out(out));
  st.finish();
}

void Backend::moe_permutation(ConstFloatView routing_map, const MoePermutation& p, IndexView row_token,
                              IndexView row_slot, IndexView token_rows, IndexView slot_row, IndexView expert_rows) {
  constexpr BackendOp op = BackendOp::moe_permutation;
  dims(op, {p.tokens, p.experts, p.first, p.count, p.capacity + 1});
  if (p.topk < 1 || p.row_multiple < 1) fail(op, "topk and row_multiple must be >= 1");
  if (p.first + p.count > p.experts) fail(op, "the experts' range ends past the experts");
  expect_fp32(routing_map, p.tokens * p.experts, op, "routing_map");
  expect(row_slot, row_token.size(), op, "row_slot");
  expect(token_rows, p.tokens * p.topk, op, "token_rows");
  expect(slot_row, p.tokens * p.experts, op, "slot_row");
  expect(expert_rows, p.count + 1, op, "expert_rows");
  do_moe_permutation(routing_map, p, row_token, row_slot, token_rows, slot_row, expert_rows);
}

void Backend::do_moe_permutation(ConstFloatView routing_map, const MoePermutation& p, IndexView row_token,
                                 IndexView row_slot, IndexView token_rows, IndexView slot_row,
                                 IndexView expert_rows) {
  const int64_t E = p.experts;
  const int64_t k = p.topk;
  std::vector<float> map(static_cast<std::size_t>(p.tokens * E));
  copy_to_host(routing_map, std::span<float>(map));
  const int64_t max_rows = row_token.size();
  std::vector<int64_t> tokens_of(static_cast<std::size_t>(max_rows), -1), slots_of(tokens_of);
  std::vector<int64_t> rows_of_token(static_cast<std::size_t>(p.tokens * k), -1);
  std::vector<int64_t> row_of_slot(static_cast<std::size_t>(p.tokens * E), -1);
  std::vector<int64_t> rows(static_cast<std::size_t>(p.count + 1), 0);
  std::vector<int64_t> filled(static_cast<std::size_t>(p.tokens), 0);
  int64_t& status = rows.back();
  int64_t next = 0;  // the next row
  for (int64_t j = 0; j < p.count; ++j) {
    const int64_t e = p.first + j;
    const int64_t first_row = next;
    for (int64_t t = 0; t < p.tokens; ++t) {
      if (map[static_cast<std::size_t>(t * E + e)] <= 0.0f) continue;
      const int64_t r = next++;
      if (r >= max_rows) continue;
      tokens_of[static_cast<std::size_t>(r)] = t;
      slots_of[static_cast<std::size_t>(r)] = t * E + e;
      row_of_slot[static_cast<std::size_t>(t * E + e)] = r;
      int64_t& n = filled[static_cast<std::size_t>(t)];
      if (n < k) rows_of_token[static_cast<std::size_t>(t * k + n)] = r;
      if (++n > k) status |= kMoePermutationTooManyExperts;
    }
    const int64_t padded = (std::max(next - first_row, p.capacity) + p.row_multiple - 1) / p.row_multiple * p.row_multiple;
    next = first_row + padded;
    rows[static_cast<std::size_t>(j)] = padded;
  }
  if (next > max_rows) status |= kMoePermutationTooManyRows;
  copy_from_host<int64_t>(tokens_of, row_token);
  copy_from_host<int64_t>(slots_of, row_slot);
  copy_from_host<int64_t>(rows_of_token, token_rows);
  copy_from_host<int64_t>(row_of_slot, slot_row);
  copy_from_host<int64_t>(rows, expert_rows);
}

void Backend::gather_rows(ConstFloatView in, int64_t in_rows, int64_t cols, ConstIndexView index,
                          ConstFloatView weights, FloatView out) {
  constexpr BackendOp op = BackendOp::gather_rows;
  dims(op, {in_rows, cols});
  const int64_t out_rows = index.size();
  expect(in, in_rows * cols, op, "in");
  expect_optional(weights, out_rows, op, "weights");
  expect(out, out_rows * cols, op, "out");
  if (out_rows == 0 || cols == 0) return;
  Fp32Staging st(*this, op);
  do_gather_rows(st.in(in), in_rows, cols, index.data(), out_rows, st.in(weights), st.out(out));
  st.finish();
}

void Backend::gather_sum_rows(ConstFloatView in, int64_t in_rows, int64_t cols, ConstIndexView index, int64_t k,
                              ConstFloatView weights, FloatView out) {
  constexpr BackendOp op = BackendOp::gather_sum_rows;
  dims(op, {in_rows, cols, k});
  if (k < 1) fail(op, "k must be >= 1");
  if (index.size() % k != 0) fail(op, "index must hold k entries per output row");
  const int64_t out_rows = index.size() / k;
  expect(in, in_rows * cols, op, "in");
  expect_optional(weights, in_rows, op, "weights");
  expect(out, out_rows * cols, op, "out");
  if (out_rows == 0 || cols == 0) return;
  Fp32Staging st(*this, op);
  do_gather_sum_rows(st.in(in), in_rows, cols, index.data(), out_rows, k, st.in(weights), st.out(out));
  st.finish();
}

void Backend::row_dot(ConstFloatView a, ConstFloatView b, int64_t rows, int64_t cols, FloatView out) {
  constexpr BackendOp op = BackendOp::row_dot;
  dims(op, {rows, cols});
  expect(a, rows * cols, op, "a");
  expect(b, rows * cols, op, "b");
  expect(out, rows, op, "out");
  if (rows == 0) return;
  Fp32Staging st(*this, op);
  do_row_dot(st.in(a), st.in(b), rows, cols, st.out(out));
  st.finish();
}

void Backend::scale_rows(ConstFloatView x, ConstFloatView factors, int64_t rows, int64_t cols, FloatView out) {
  constexpr BackendOp op = BackendOp::scale_rows;
  dims(op, {rows, cols});
  expect(x, rows * cols, op, "x");
  expect(factors, rows, op, "factors");
  expect(out, rows * cols, op, "out");
  if (rows == 0 || cols == 0) return;
  Fp32Staging st(*this, op);
  do_scale_rows(st.in(x), st.in(factors), rows, cols, st.out(out));
  st.finish();
}

void Backend::add_bias(FloatView y, ConstFloatView bias, int64_t rows, int64_t cols) {
  constexpr BackendOp op = BackendOp::add_bias;
  dims(op, {rows, cols});
  expect(y, rows * cols, op, "y");
  expect(bias, cols, op, "bias");
  Fp32Staging st(*this, op);
  do_add_bias(st.inout(y), st.in(bias), rows, cols);
  st.finish();
}

void Backend::add(ConstFloatView a, ConstFloatView b, FloatView out, ConstFloatView c) {
  constexpr BackendOp op = BackendOp::add;
  expect(b, a.size(), op, "b");
  expect_optional(c, a.size(), op, "c");
  expect(out, a.size(), op, "out");
  if (a.size() > 0) {
    Fp32Staging st(*this, op);
    do_add(st.in(a), st.in(b), st.in(c), a.size(), st.out(out));
    st.finish();
  }
}

void Backend::accumulate(FloatView y, ConstFloatView x) {
  constexpr BackendOp op = BackendOp::accumulate;
  expect(x, y.size(), op, "x");
  if (y.size() > 0) {
    Fp32Staging st(*this, op);
    do_accumulate(st.inout(y), st.in(x), y.size());
    st.finish();
  }
}

void Backend::scale(FloatView x, float factor) {
  if (x.size() > 0) {
    Fp32Staging st(*this, BackendOp::scale);
    do_scale(st.inout(x), x.size(), factor);
    st.finish();
  }
}

void Backend::adamw_step(FloatView param, ConstFloatView grad, FloatView exp_avg,
                         FloatView exp_avg_sq, const AdamWParams& params, int64_t step) {
  constexpr BackendOp op = BackendOp::adamw_step;
  expect(grad, param.size(), op, "grad");
  expect(exp_avg, param.size(), op, "exp_avg");
  expect(exp_avg_sq, param.size(), op, "exp_avg_sq");
  if (step < 1) fail(op, "step must be >= 1");
  if (param.size() > 0) {
    Fp32Staging st(*this, op);
    do_adamw_step(st.inout(param), st.in(grad), st.inout(exp_avg), st.inout(exp_avg_sq), param.size(),
                  params, step);
    st.finish();
  }
}

void Backend::adamw_update(FloatView param, ConstFloatView grad, FloatView exp_avg,
                           FloatView exp_avg_sq, std::span<const int64_t> segment_ends,
                           std::span<const int64_t> segment_flags, const AdamWParams& params,
                           float decoupled_lr, float grad_scale, int64_t step, FloatView compute) {
  constexpr BackendOp op = BackendOp::adamw_update;
  expect(grad, param.size(), op, "grad");
  expect(exp_avg, param.size(), op, "exp_avg");
  expect(exp_avg_sq, param.size(), op, "exp_avg_sq");
  expect_optional(compute, param.size(), op, "compute");
  if (step < 1) fail(op, "step must be >= 1");
  if (!param.is_fp32() || !grad.is_fp32()) fail(op, "parameters and gradients must be fp32");
  for (const FloatView& moment : {exp_avg, exp_avg_sq})
    if (moment.type() == FloatType::kF16) fail(op, "moments must be fp32 or bf16");
  if (segment_ends.size() != segment_flags.size()) fail(op, "one flag set per segment");
  int64_t previous = 0;
  for (const int64_t end : segment_ends) {
    if (end < previous) fail(op, "segment ends must increase");
    previous = end;
  }
  if (previous != param.size()) fail(op, "the last segment must end at the buffer's end");
  if (param.size() > 0) {
    do_adamw_update(param, grad, exp_avg, exp_avg_sq, segment_ends, segment_flags, params,
                    decoupled_lr, grad_scale, step, compute);
  }
}

void Backend::do_adamw_update(FloatView param, ConstFloatView grad, FloatView exp_avg,
                              FloatView exp_avg_sq, std::span<const int64_t> segment_ends,
                              std::span<const int64_t> segment_flags, const AdamWParams& params,
                              float decoupled_lr, float grad_scale, int64_t step,
                              FloatView compute) {
  if (!exp_avg.is_fp32() || !exp_avg_sq.is_fp32())
    return adamw_update_on_fp32_moments(param, grad, exp_avg, exp_avg_sq, segment_ends, segment_flags, params,
                                        decoupled_lr, grad_scale, step, compute);
  DeviceBuffer scaled;
  if (grad_scale != 1.0f) {
    scaled = DeviceBuffer(*this, grad.size());
    do_copy(grad, scaled.view(), grad.size());
    do_scale(scaled.view(), grad.size(), grad_scale);
    grad = scaled.view();
  }
  int64_t begin = 0;
  for (size_t r = 0; r < segment_ends.size(); ++r) {
    const int64_t n = segment_ends[r] - begin;
    if (n > 0) {
      AdamWParams run = params;
      if ((segment_flags[r] & kAdamWDecay) == 0) run.weight_decay = 0.0f;
      if ((segment_flags[r] & kAdamWDecoupledLr) != 0) run.lr = decoupled_lr;
      do_adamw_step(param.subspan(begin, n), grad.subspan(begin, n), exp_avg.subspan(begin, n),
                    exp_avg_sq.subspan(begin, n), n, run, step);
    }
    begin = segment_ends[r];
  }
  if (!compute.empty()) do_convert(param, compute);
}

void Backend::adamw_update_on_fp32_moments(FloatView param, ConstFloatView grad, FloatView exp_avg,
                                           FloatView exp_avg_sq, std::span<const int64_t> segment_ends,
                                           std::span<const int64_t> segment_flags, const AdamWParams& params,
                                           float decoupled_lr, float grad_scale, int64_t step, FloatView compute) {
  // As Transformer Engine's FusedAdam does with its fp32 copies of bf16 states: each part's
  // moments read into fp32, updated as fp32 moments are, stored back rounded to nearest even; a
  // part at a time, so that the copies stay small.
  constexpr int64_t kPart = int64_t{1} << 24;
  const int64_t n = param.size();
  DeviceBuffer m(*this, std::min(n, kPart)), v(*this, std::min(n, kPart));
  std::vector<int64_t> ends, flags;
  std::size_t first_segment = 0;
  for (int64_t begin = 0; begin < n; begin += kPart) {
    const int64_t len = std::min(kPart, n - begin);
    // The runs that overlap [begin, begin + len), their ends made relative to begin.
    while (segment_ends[first_segment] <= begin) ++first_segment;
    ends.clear();
    flags.clear();
    for (std::size_t r = first_segment; r < segment_ends.size(); ++r) {
      ends.push_back(std::min(segment_ends[r], begin + len) - begin);
      flags.push_back(segment_flags[r]);
      if (segment_ends[r] >= begin + len) break;
    }
    const FloatView m_part = m.view().first(len), v_part = v.view().first(len);
    do_convert(exp_avg.subspan(begin, len), m_part);
    do_convert(exp_avg_sq.subspan(begin, len), v_part);
    do_adamw_update(param.subspan(begin, len), grad.subspan(begin, len), m_part, v_part, ends, flags, params,
                    decoupled_lr, grad_scale, step, compute.empty() ? compute : compute.subspan(begin, len));
    do_convert(m_part, exp_avg.subspan(begin, len));
    do_convert(v_part, exp_avg_sq.subspan(begin, len));
  }
}

double Backend::sum_of_squares(ConstFloatView x) {
  if (x.empty()) return 0.0;
  Fp32Staging st(*this, BackendOp::sum_of_squares);
  const auto result = do_sum_of_squares(st.in(x), x.size());
  st.finish();
  return result;
}

double Backend::sum_of_squares(ConstFloatView x, std::span<const ElementRange> ranges) {
  std::vector<ElementRange> pieces;
  pieces.reserve(ranges.size());
  for (const ElementRange& r : ranges) {
    if (r.begin < 0 || r.count < 0 || r.begin > x.size() - r.count) {
      fail(BackendOp::sum_of_squares, "range [" + std::to_string(r.begin) + ", +" + std::to_string(r.count) +
                                 ") outside the " + std::to_string(x.size()) + " elements");
    }
    if (r.count > 0) pieces.push_back(r);
  }
  return pieces.empty() ? 0.0 : do_sum_of_squares_ranges(x, pieces);
}

double Backend::do_sum_of_squares_ranges(ConstFloatView x, std::span<const ElementRange> ranges) {
  double sum = 0.0;
  for (const ElementRange& r : ranges) sum += sum_of_squares(x.subspan(r.begin, r.count));
  return sum;
}

}  // namespace mgt
