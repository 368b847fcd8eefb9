// Shared by the checkpoint tests: deterministic tensor contents and a small model-like shard
// whose every byte can be regenerated from a seed, so a reader can check a load bit for bit.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "ckpt/checkpoint_metadata.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/tensor_paths.hpp"
#include "ckpt/tensor_record.hpp"

namespace mgt::ckpt_test {

using namespace mgt::ckpt;

inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline std::vector<std::byte> pseudo_random_bytes(std::size_t size, std::uint64_t seed) {
  std::vector<std::byte> bytes(size);
  std::uint64_t state = seed;
  for (std::size_t i = 0; i < size; i += 8) {
    std::uint64_t word = splitmix64(state);
    std::memcpy(bytes.data() + i, &word, std::min<std::size_t>(8, size - i));
  }
  return bytes;
}

// A stand-in for a model's state: `count` fp32 weights [rows, 64] with their Adam state.
struct FakeState {
  std::vector<TensorRecord> records;
  std::vector<std::vector<std::byte>> contents;
  CheckpointMetadata metadata;
};

inline FakeState make_fake_state(std::uint64_t seed, int count, std::int64_t rows) {
  FakeState state;
  state.metadata.iteration = static_cast<std::int64_t>(seed);
  state.metadata.consumed_train_samples = static_cast<std::int64_t>(seed) * 1000;
  state.metadata.args_json = "{\"seed\": " + std::to_string(seed) + "}";
  for (int i = 0; i < count; ++i) {
    const std::string param = "decoder.layers." + std::to_string(i) + ".mlp.linear_fc1.weight";
    for (const auto& name : {model_tensor_path(param), optimizer_tensor_path(OptimizerState::ExpAvg, param)}) {
      auto record = TensorRecord::whole(name, TensorDType::Float32, {rows, 64});
      state.contents.push_back(pseudo_random_bytes(record.byte_size(), seed * 1000003 + state.records.size()));
      state.records.push_back(std::move(record));
    }
  }
  return state;
}

inline void write_fake_state(ShardWriter& writer, const FakeState& state) {
  for (std::size_t i = 0; i < state.records.size(); ++i) writer.write(state.records[i], state.contents[i]);
}

// True when the shard holds exactly the state (same tensors, same bytes, same bookkeeping).
inline bool shard_matches(const ShardReader& reader, const FakeState& state) {
  if (reader.metadata().consumed_train_samples != state.metadata.consumed_train_samples) return false;
  if (reader.tensors().size() != state.records.size()) return false;
  for (std::size_t i = 0; i < state.records.size(); ++i) {
    if (!reader.contains(state.records[i].name) || reader.tensor(state.records[i].name) != state.records[i])
      return false;
    std::vector<std::byte> out(state.contents[i].size());
    reader.read(state.records[i].name, state.records[i].dtype, state.records[i].shape, out);
    if (out != state.contents[i]) return false;
  }
  return true;
}

}  // namespace mgt::ckpt_test

namespace Catch {
template <>
struct StringMaker<mgt::ckpt::TensorRecord> {
  static std::string convert(const mgt::ckpt::TensorRecord& r) {
    std::string s = "{" + r.name + " " + std::string(mgt::ckpt::dtype_name(r.dtype)) + " " +
                    mgt::ckpt::format_shape(r.shape) + " of " + mgt::ckpt::format_shape(r.global_shape) + " dim " +
                    std::to_string(r.partition.dim) + " rank " + std::to_string(r.partition.rank) + "/" +
                    std::to_string(r.partition.count);
    if (r.flat_range)
      s += " flat " + std::to_string(r.flat_range->offset) + "+" + std::to_string(r.flat_range->length);
    return s + "}";
  }
};
}  // namespace Catch
