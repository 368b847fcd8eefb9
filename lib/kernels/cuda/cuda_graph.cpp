#include "kernels/cuda/cuda_graph.hpp"

#include <string>

#include "core/error.hpp"
#include "core/log.hpp"
#include "kernels/cuda_check.hpp"

namespace mgt::cuda {
namespace {

class CudaGraph final : public RecordedOperations {
public:
  CudaGraph(cudaGraphExec_t exec, cudaStream_t stream) : exec_(exec), stream_(stream) {}
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph() override { cudaGraphExecDestroy(exec_); }
  void replay() override { MGT_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }

private:
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
};

// Ends the capture in progress; the graph it made, or nullptr where the capture failed.
cudaGraph_t end_capture(cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  if (cudaStreamEndCapture(stream, &graph) != cudaSuccess) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    graph = nullptr;
  }
  return graph;
}

}  // namespace

std::unique_ptr<RecordedOperations> record_graph(cudaStream_t stream, const std::function<void()>& run,
                                                 bool& recording) {
  // Thread-local mode: only this thread's unsafe calls (a synchronisation, a plain cudaMalloc)
  // break the capture, and they do so with an error instead of corrupting it.
  MGT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  recording = true;
  bool captured = true;
  std::string why;
  try {
    run();
  } catch (const Error& e) {
    captured = false;  // an operation the graph cannot hold; the caller runs them directly
    why = e.what();
  } catch (...) {
    recording = false;
    if (cudaGraph_t graph = end_capture(stream)) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    throw;
  }
  recording = false;
  cudaGraph_t graph = end_capture(stream);
  cudaGraphExec_t exec = nullptr;
  if (captured && graph != nullptr && cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) exec = nullptr;
  if (graph != nullptr) cudaGraphDestroy(graph);
  // A failed capture's error must not surface at the next launch check.
  (void)cudaGetLastError();
  if (exec == nullptr) {
    log::warn("operations could not be recorded as a CUDA graph (" + (why.empty() ? "capture failed" : why) +
              "); they run one launch each");
    return nullptr;
  }
  auto recorded = std::make_unique<CudaGraph>(exec, stream);
  recorded->replay();
  return recorded;
}

}  // namespace mgt::cuda
