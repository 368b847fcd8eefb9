// The interleaved split of the layers (Megatron's get_transformer_layer_offset with virtual
// stages): chunk v of rank p holds virtual stage v·P + p; the parameter table of a rank names
// its chunks' layers by their global numbers, the embedding on rank 0 and the head on rank P − 1.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "model/parameter_table.hpp"
#include "model/pipeline_stage.hpp"
#include "model_testing.hpp"

using namespace mgt;

TEST_CASE("interleaved pipeline stages: chunk v of rank p holds virtual stage v*P + p", "[model][pp]") {
  // 8 layers, P=2, V=2: virtual stages of 2 layers; rank 0 holds 0, 1 and 4, 5; rank 1 holds 2, 3 and 6, 7.
  const std::vector<PipelineStage> stages = pipeline_stages(8, {2, {}, {}, 2});
  REQUIRE(stages.size() == 2);
  std::vector<int64_t> rank1;
  for (int64_t l = 0; l < stages[1].layers_of(8); ++l) rank1.push_back(stages[1].layer_at(l, 8));
  CHECK(rank1 == std::vector<int64_t>{2, 3, 6, 7});
  CHECK(stages[0].layer_at(2, 8) == 4);
  CHECK(stages[1].chunk_layers(8) == 2);
  CHECK(stages[1].local_index(6, 8) == 2);
  CHECK(stages[1].local_index(4, 8) == -1);
  CHECK(stages[0].holds_layer(5, 8));
  CHECK_FALSE(stages[0].holds_layer(3, 8));
  // P=4, V=2, one layer per chunk: rank 3 holds layers 3 and 7.
  const PipelineStage last = pipeline_stage(8, {4, {}, {}, 2}, 3);
  CHECK(last.layer_at(0, 8) == 3);
  CHECK(last.layer_at(1, 8) == 7);
  CHECK(last.is_last());
  // Megatron's rules.
  CHECK_THROWS_WITH(pipeline_stages(6, {2, {}, {}, 2}), Catch::Contains("must be divisible by --pipeline-model-parallel-size (2) times"));
  CHECK_THROWS_WITH(pipeline_stages(8, {1, {}, {}, 2}), Catch::Contains("needs --pipeline-model-parallel-size > 1"));
  CHECK_THROWS_WITH(pipeline_stages(8, {2, 2, {}, 2}), Catch::Contains("not implemented with the interleaved schedule"));
}

TEST_CASE("interleaved pipeline stages: parameter tables keep the global layer names", "[model][pp]") {
  GptConfig c = model_testing::gpt2_like_config();
  c.num_layers = 4;
  c = c.resolved();
  const std::vector<PipelineStage> stages = pipeline_stages(4, {2, {}, {}, 2});
  const ParameterTable first = gpt_parameter_table(c, {1, 0}, stages[0]);
  const ParameterTable last = gpt_parameter_table(c, {1, 0}, stages[1]);
  std::vector<std::string> first_layers, last_layers;
  for (const ParameterEntry& e : first.entries)
    if (e.name.ends_with("input_layernorm.weight")) first_layers.push_back(e.name);
  for (const ParameterEntry& e : last.entries)
    if (e.name.ends_with("input_layernorm.weight")) last_layers.push_back(e.name);
  CHECK(first_layers == std::vector<std::string>{"decoder.layers.0.input_layernorm.weight",
                                                 "decoder.layers.2.input_layernorm.weight"});
  CHECK(last_layers == std::vector<std::string>{"decoder.layers.1.input_layernorm.weight",
                                                "decoder.layers.3.input_layernorm.weight"});
  CHECK(first.entries.front().name == "embedding.word_embeddings.weight");
  // The last rank's tied copy of the word embedding, and the final norm.
  bool copy = false, final_norm = false;
  for (const ParameterEntry& e : last.entries) {
    copy = copy || (e.name == "embedding.word_embeddings.weight" && e.pipeline_duplicate);
    final_norm = final_norm || e.name == "decoder.final_layernorm.weight";
  }
  CHECK(copy);
  CHECK(final_norm);
}

TEST_CASE("pipeline stages: the embedding and the loss counted as layers", "[model][pp]") {
  // Megatron's get_num_layers_to_build: 30 layers + embedding + loss over 8 stages of 4; the
  // first and last build 3 transformer layers, the others 4, in order.
  PipelineSplit split{8, {}, {}, 1, true, true};
  const std::vector<PipelineStage> stages = pipeline_stages(30, split);
  REQUIRE(stages.size() == 8);
  std::vector<int64_t> counts, firsts;
  for (const PipelineStage& s : stages) {
    counts.push_back(s.num_layers);
    firsts.push_back(s.first_layer);
  }
  CHECK(counts == std::vector<int64_t>{3, 4, 4, 4, 4, 4, 4, 3});
  CHECK(firsts == std::vector<int64_t>{0, 3, 7, 11, 15, 19, 23, 27});
  // The embedding alone: 7 layers + 1 over 4 stages of 2.
  split = {4, {}, {}, 1, true, false};
  counts.clear();
  for (const PipelineStage& s : pipeline_stages(7, split)) counts.push_back(s.num_layers);
  CHECK(counts == std::vector<int64_t>{1, 2, 2, 2});
  // One stage: the whole model.
  split = {1, {}, {}, 1, true, true};
  CHECK(pipeline_stages(4, split).front().whole_model());
  split = {2, {}, {}, 2, true, false};
  CHECK_THROWS_WITH(pipeline_stages(8, split), Catch::Contains("not implemented with the interleaved schedule"));
}
