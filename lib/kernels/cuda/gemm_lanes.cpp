#include "kernels/cuda/gemm_lanes.hpp"

#include <algorithm>

#include "kernels/cuda_check.hpp"

namespace mgt::cuda {

GemmLanes::GemmLanes(cudaStream_t stream, int lanes, bool report)
    : stream_(stream), lanes_(std::max(lanes, 1)), report_(report) {}

GemmLanes::~GemmLanes() {
  // Teardown errors cannot be reported from a destructor; the process is ending anyway.
  for (Side& side : sides_) {
    side.lt.reset();  // frees its workspace on its stream, which must still exist
    if (side.done != nullptr) cudaEventDestroy(side.done);
    if (side.stream != nullptr) {
      cudaStreamSynchronize(side.stream);
      cudaStreamDestroy(side.stream);
    }
  }
  if (start_ != nullptr) cudaEventDestroy(start_);
}

void GemmLanes::set_timed_choice(bool timed) {
  timed_choice_ = timed;
  // Plans already made keep their choice: the side lanes start over, as the caller's LtMatmul does.
  for (Side& side : sides_) {
    side.lt = std::make_unique<LtMatmul>(side.stream, report_);
    side.lt->set_timed_choice(timed_choice_);
  }
}

void GemmLanes::make_sides() {
  MGT_CUDA_CHECK(cudaEventCreateWithFlags(&start_, cudaEventDisableTiming));
  sides_.resize(static_cast<std::size_t>(lanes_ - 1));
  for (Side& side : sides_) {
    MGT_CUDA_CHECK(cudaStreamCreateWithFlags(&side.stream, cudaStreamNonBlocking));
    MGT_CUDA_CHECK(cudaEventCreateWithFlags(&side.done, cudaEventDisableTiming));
    side.lt = std::make_unique<LtMatmul>(side.stream, report_);
    side.lt->set_timed_choice(timed_choice_);
  }
}

void GemmLanes::run(LtMatmul& main, std::span<const int64_t> weight,
                    const std::function<void(const Lane&, int64_t)>& f) {
  const auto items = static_cast<int64_t>(weight.size());
  const int64_t busy = std::count_if(weight.begin(), weight.end(), [](int64_t w) { return w > 0; });
  if (lanes_ == 1 || busy < 2) {
    for (int64_t i = 0; i < items; ++i)
      if (weight[static_cast<std::size_t>(i)] > 0) f(Lane{main, stream_, 0}, i);
    return;
  }
  if (sides_.empty()) make_sides();
  MGT_CUDA_CHECK(cudaEventRecord(start_, stream_));
  const int lanes = static_cast<int>(std::min<int64_t>(lanes_, busy));
  for (int s = 0; s + 1 < lanes; ++s) MGT_CUDA_CHECK(cudaStreamWaitEvent(sides_[static_cast<std::size_t>(s)].stream, start_));
  std::vector<int64_t> load(static_cast<std::size_t>(lanes), 0);
  for (int64_t i = 0; i < items; ++i) {
    const int64_t w = weight[static_cast<std::size_t>(i)];
    if (w <= 0) continue;
    const auto lane = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    load[static_cast<std::size_t>(lane)] += w;
    if (lane == 0) {
      f(Lane{main, stream_, 0}, i);
    } else {
      Side& side = sides_[static_cast<std::size_t>(lane - 1)];
      f(Lane{*side.lt, side.stream, lane}, i);
    }
  }
  for (int s = 0; s + 1 < lanes; ++s) {
    Side& side = sides_[static_cast<std::size_t>(s)];
    MGT_CUDA_CHECK(cudaEventRecord(side.done, side.stream));
    MGT_CUDA_CHECK(cudaStreamWaitEvent(stream_, side.done));
  }
}

}  // namespace mgt::cuda
