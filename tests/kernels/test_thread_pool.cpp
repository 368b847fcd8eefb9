// The CPU backend's thread pool: every item exactly once, exceptions carried to the caller,
// nested calls run serially; and a model step that does not depend on the thread count.
#include <catch2/catch.hpp>
#include <atomic>
#include <stdexcept>
#include <vector>

#include "../model/model_testing.hpp"
#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/thread_pool.hpp"

using namespace mgt;

TEST_CASE("Thread pool ranges cover every item exactly once", "[kernels]") {
  ThreadPool pool(4);
  CHECK(pool.size() == 4);
  for (int64_t n : {0, 1, 3, 4, 5, 17, 1000}) {
    for (int64_t grain : {1, 2, 100}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.for_each_range(n, grain, [&](int64_t b, int64_t e) {
        CHECK(b < e);
        for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
      });
      for (auto& h : hits) CHECK(h == 1);
    }
  }
}

TEST_CASE("Thread pool rethrows a range's exception and stays usable, nested calls run", "[kernels]") {
  ThreadPool pool(3);
  CHECK_THROWS_WITH(pool.for_each_range(300, 1,
                                        [](int64_t b, int64_t) {
                                          if (b > 0) throw std::runtime_error("range failed");
                                        }),
                    "range failed");
  std::atomic<int64_t> total{0};
  pool.for_each_range(30, 1, [&](int64_t b, int64_t e) {
    pool.for_each_range(e - b, 1, [&](int64_t bb, int64_t ee) { total += ee - bb; });
  });
  CHECK(total == 30);
}

TEST_CASE("A training step gives the same bits on 1 and 3 CPU threads", "[kernels]") {
  using namespace mgt::model_testing;
  for (GptConfig c : {gpt2_like_config(), llama_like_config()}) {  // MHA; GQA (grouped dk/dv)
  c.hidden_size = 64;
  c.hidden_dropout = 0.1;
  c.attention_dropout = 0.1;
  c.padded_vocab_size = 2048;  // wide enough rows for the pool to split the cross-entropy
  std::vector<float> grads[2];
  double losses[2];
  int i = 0;
  for (int threads : {1, 3}) {
    CpuBackend backend(threads);
    CHECK(backend.threads() == threads);
    GptModel model(c, backend, 5);
    const RefBatch batch = random_batch(model.config(), 4, 8, 9);
    model.parameters().zero_grads();
    losses[i] = model.forward_backward(micro_batch(batch), DropoutRng{5, 2}, 1).loss_sum;
    grads[i] = read_all_grads(model.parameters());
    ++i;
  }
  CHECK(losses[0] == losses[1]);
  CHECK(grads[0] == grads[1]);
  }
}
