#include "model/gpt_parameters.hpp"

#include "core/error.hpp"
#include "kernels/thread_pool.hpp"
#include "model/parameter_init.hpp"

namespace mgt {

GptParameters::GptParameters(const GptConfig& config, Backend& backend,
                             const TensorParallelRank& tp, const PipelineStage& stage,
                             const ExpertParallelRank& ep, ParameterUse use)
    : backend_(&backend),
      config_(config.resolved()),
      tp_(tp),
      stage_(stage),
      ep_(ep),
      table_(gpt_parameter_table(config_, tp_, stage_, ep_)),
      // Shareable: the data-parallel ranks on one machine read each other's gradients and
      // weights with the copy engines (dist/nccl_peer_copy.hpp).
      params_(keeps_fp32_parameters(use, backend.activation_type(), config_)
                  ? DeviceBuffer(backend, table_.buffer_size, FloatType::kF32, MemorySharing::kShareable)
                  : DeviceBuffer()),
      use_(use),
      grads_(use == ParameterUse::kTraining
                 ? DeviceBuffer(backend, table_.buffer_size, FloatType::kF32, MemorySharing::kShareable)
                 : DeviceBuffer()),
      moe_expert_bias_(config_.moe, config_.num_layers, stage_, backend),
      grad_zeroing_(table_.entries) {
  if (!params_.empty()) backend.fill(params_.view(), 0.0f);
  if (!grads_.empty()) backend.fill(grads_.view(), 0.0f);
  if (backend.activation_type() != FloatType::kF32) {
    // Shareable too: the distributed optimizer gathers the updated bf16 weights.
    compute_ = DeviceBuffer(backend, table_.buffer_size, backend.activation_type(), MemorySharing::kShareable);
    if (params_.empty()) {
      backend.fill(compute_.view(), 0.0f);
      compute_stale_ = false;
    } else {
      refresh_compute_copy();
    }
  }
}

void GptParameters::throw_no_fp32_parameters() {
  throw Error("internal error: the fp32 parameters of a model built for inference are not kept");
}

void GptParameters::refresh_compute_copy() {
  if (compute_.empty() || !compute_stale_) return;
  backend_->convert(params_.view(), compute_.view());
  compute_stale_ = false;
}

void GptParameters::initialize(uint64_t seed) {
  // Generated on the host and copied in one transfer: initialisation happens once per run. A
  // normal sample (Philox and Box-Muller in double) takes about 40 ns, most of a minute for a
  // 1.3B model on one core: the elements are cut into ranges over the host's cores, which gives
  // the same values (initialize_parameter_range).
  std::vector<float> host(static_cast<size_t>(table_.buffer_size), 0.0f);
  ThreadPool pool(default_cpu_threads());
  for (const ParameterEntry& e : table_.entries) {
    pool.for_each_range(e.numel(), int64_t{1} << 16, [&](int64_t begin, int64_t end) {
      initialize_parameter_range(e, tp_, seed, begin,
                                 std::span<float>(host).subspan(static_cast<size_t>(e.offset + begin),
                                                                static_cast<size_t>(end - begin)));
    });
  }
  backend_->copy_from_host(host, params());
}

void GptParameters::zero_grads() {
  if (for_inference()) throw Error("internal error: gradients asked of parameters built for inference");
  grad_zeroing_.begin_iteration(*backend_, grads());
}

std::vector<float> GptParameters::read_param(const ParameterEntry& e) const {
  std::vector<float> host(static_cast<size_t>(e.numel()));
  if (compute_only()) {
    DeviceBuffer staged(*backend_, e.numel());
    backend_->convert(compute_param(e), staged.view());
    backend_->copy_to_host(staged.view(), host);
  } else {
    backend_->copy_to_host(param(e), host);
  }
  return host;
}

std::vector<float> GptParameters::read_grad(const ParameterEntry& e) const {
  std::vector<float> host(static_cast<size_t>(e.numel()));
  backend_->copy_to_host(grad(e), host);
  return host;
}

void GptParameters::write_param(const ParameterEntry& e, std::span<const float> values) {
  if (compute_only()) {
    // Rounded into the compute copy as refresh_compute_copy rounds the fp32 parameters.
    DeviceBuffer staged(*backend_, e.numel());
    backend_->copy_from_host(values, staged.view());
    backend_->convert(staged.view(), compute_.view().subspan(e.offset, e.numel()));
    ++params_version_;
    return;
  }
  backend_->copy_from_host(values, param(e));
}

int64_t GptParameters::num_local_elements() const {
  int64_t total = 0;
  for (const ParameterEntry& e : table_.entries) total += e.numel();
  return total;
}

}  // namespace mgt
