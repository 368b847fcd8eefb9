// Independent GEMMs of one operation (a mixture's experts, each over its own rows) spread over
// several streams. One after another on one stream, each expert's GEMM ends in a partly filled
// wave of tiles, and a weight gradient's epilogue reads and writes its fp32 main gradient while
// the tensor cores idle; side by side, one GEMM's tail and epilogue overlap another's main loop.
// Each GEMM writes only its own rows or weight, so the results do not depend on the lanes.
// CudaBackend::side_by_side runs whole items on the same lanes (a mixture's FP8 experts: their
// casts and GEMMs), each item's operations issued to its lane's stream.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "kernels/cuda/lt_matmul.hpp"

namespace mgt::cuda {

class GemmLanes {
public:
  // `lanes` streams in all, the caller's own among them; the side streams, their cuBLASLt
  // workspaces and plans are made at the first run.
  GemmLanes(cudaStream_t stream, int lanes, bool report);
  GemmLanes(const GemmLanes&) = delete;
  GemmLanes& operator=(const GemmLanes&) = delete;
  ~GemmLanes();

  // As LtMatmul::set_timed_choice, for the side lanes' plans.
  void set_timed_choice(bool timed);

  struct Lane {
    LtMatmul& lt;
    cudaStream_t stream;
    int index;  // 0: the caller's stream; the same stream for the same index on every run
  };
  int lanes() const { return lanes_; }
  // Calls f(lane, i) for each item i with weight[i] > 0 (its rows), on the lane with the least
  // weight so far; `main` is the caller's LtMatmul on its stream. The side lanes start after
  // everything queued on the stream so far, and the stream waits for them before what comes next.
  void run(LtMatmul& main, std::span<const int64_t> weight, const std::function<void(const Lane&, int64_t)>& f);

private:
  struct Side {
    cudaStream_t stream = nullptr;
    std::unique_ptr<LtMatmul> lt;
    cudaEvent_t done = nullptr;
  };
  void make_sides();

  cudaStream_t stream_;
  int lanes_;
  bool report_;
  bool timed_choice_ = true;
  cudaEvent_t start_ = nullptr;
  std::vector<Side> sides_;
};

}  // namespace mgt::cuda
